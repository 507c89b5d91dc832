package io.gpusockets.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.cli.Main;
import io.gpusockets.frontend.DnsDiscovery;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;
import tools.jackson.databind.JsonNode;

/**
 * deploy/kubernetes: every manifest reads strictly into the Kubernetes model of its kind
 * ({@link StrictManifests}), the kustomization lists exactly the manifests there are, and the pieces
 * fit together: the backend's arguments parse with its real command line, the tenants file with
 * {@link TenantConfig}, the client's GPUSOCKETS_SERVER names the headless Service.
 */
class KubernetesManifestsTest {
    static final Path DIR = Path.of("kubernetes");
    static final String NAMESPACE = "gpusockets";

    @TempDir
    Path tmp;

    private static Map<String, HasMetadata> manifests() throws IOException {
        Map<String, HasMetadata> read = new HashMap<>();
        for (String file : resources()) {
            read.put(file, StrictManifests.read(Files.readString(DIR.resolve(file)), file));
        }
        return read;
    }

    private static List<String> resources() throws IOException {
        JsonNode k = StrictManifests.YAML.readTree(Files.readString(DIR.resolve("kustomization.yaml")));
        List<String> files = new ArrayList<>();
        k.path("resources").forEach(n -> files.add(n.asString()));
        return files;
    }

    @SuppressWarnings("unchecked")
    private static <T extends HasMetadata> T one(Class<T> kind) throws IOException {
        List<HasMetadata> found = manifests().values().stream().filter(kind::isInstance).toList();
        assertEquals(1, found.size(), "manifests of kind " + kind.getSimpleName());
        return (T) found.getFirst();
    }

    @Test
    void everyManifestReadsStrictlyIntoItsModel() throws IOException {
        Map<String, HasMetadata> all = manifests();
        assertEquals(Set.of("Namespace", "ConfigMap", "Secret", "Service", "DaemonSet", "Deployment"),
                new TreeSet<>(all.values().stream().map(HasMetadata::getKind).toList()).stream().collect(java.util.stream.Collectors.toSet()));
        for (var e : all.entrySet()) {
            String ns = e.getValue().getMetadata().getNamespace();
            assertTrue(ns == null || ns.equals(NAMESPACE), e.getKey() + ": namespace " + ns + " (kustomize sets " + NAMESPACE + ")");
        }
    }

    @Test
    void theKustomizationListsEveryManifestAndSetsTheNamespace() throws IOException {
        JsonNode k = StrictManifests.YAML.readTree(Files.readString(DIR.resolve("kustomization.yaml")));
        assertEquals("kustomize.config.k8s.io/v1beta1", k.path("apiVersion").asString());
        assertEquals("Kustomization", k.path("kind").asString());
        assertEquals(NAMESPACE, k.path("namespace").asString());
        Set<String> known = Set.of("apiVersion", "kind", "namespace", "labels", "resources", "images");
        for (var p : k.properties()) {
            assertTrue(known.contains(p.getKey()), "kustomization.yaml: unknown field " + p.getKey());
        }
        Set<String> yamlFiles;
        try (Stream<Path> files = Files.list(DIR)) {
            yamlFiles = files.map(f -> f.getFileName().toString())
                    .filter(f -> f.endsWith(".yaml") && !f.equals("kustomization.yaml")).collect(java.util.stream.Collectors.toSet());
        }
        assertEquals(yamlFiles, Set.copyOf(resources()));
        assertEquals(resources().size(), Set.copyOf(resources()).size(), "a resource listed twice");
    }

    /** Proof that the strict reading can fail: a misspelt field anywhere, or a wrong type, is refused. */
    @Test
    void aMisspeltFieldIsRefused() throws IOException {
        String daemonSet = Files.readString(DIR.resolve("backend-daemonset.yaml"));
        StrictManifests.read(daemonSet, "as shipped");
        for (String[] plant : new String[][] {
            {"      nodeSelector:", "      nodeSelecter:"},            // pod spec
            {"          readinessProbe:", "          readinessprobe:"}, // container
            {"            periodSeconds: 20", "            periodSecond: 20"}, // probe
            {"              nvidia.com/gpu: 1", "              nvidia.com/gpu: 1\n            limit:\n              cpu: 1"}, // resources
            {"  updateStrategy:", "  updatestrategy:"},                // DaemonSet spec
            {"  name: gpusockets-backend\n", "  name: gpusockets-backend\n  nmespace: x\n"}, // metadata
        }) {
            assertTrue(daemonSet.contains(plant[0]), "the plant's anchor: " + plant[0]);
            String wrong = daemonSet.replaceFirst(java.util.regex.Pattern.quote(plant[0]), java.util.regex.Matcher.quoteReplacement(plant[1]));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StrictManifests.read(wrong, "planted"),
                    plant[1]);
            assertTrue(e.getMessage().contains("does not have"), e.getMessage());
        }
        String wrongType = daemonSet.replace("periodSeconds: 20", "periodSeconds: twenty");
        assertThrows(IllegalArgumentException.class, () -> StrictManifests.read(wrongType, "planted"));
        String service = Files.readString(DIR.resolve("backend-service.yaml"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> StrictManifests.read(service.replace("clusterIP: None", "clusterIp: None"), "planted"));
        assertTrue(e.getMessage().contains("[clusterIp]"), e.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> StrictManifests.read(service.replace("apiVersion: v1", "apiVersion: apps/v1"), "planted"));
    }

    @Test
    void theServiceIsHeadlessAndSelectsTheBackendPods() throws IOException {
        Service svc = one(Service.class);
        DaemonSet ds = one(DaemonSet.class);
        assertEquals("None", svc.getSpec().getClusterIP());
        Map<String, String> podLabels = ds.getSpec().getTemplate().getMetadata().getLabels();
        svc.getSpec().getSelector().forEach((k, v) -> assertEquals(v, podLabels.get(k), "selector " + k));
        assertEquals(ds.getSpec().getSelector().getMatchLabels(), svc.getSpec().getSelector());
        ServicePort port = svc.getSpec().getPorts().getFirst();
        Container backend = ds.getSpec().getTemplate().getSpec().getContainers().getFirst();
        assertTrue(backend.getPorts().stream().anyMatch(p -> p.getName().equals(port.getTargetPort().getStrVal())
                && p.getContainerPort().equals(port.getPort())), "the Service's targetPort is a named port of the backend");
    }

    /** gpusockets' command line, set up as Main.main sets it up. */
    private static CommandLine commandLine() {
        return new CommandLine(new Main()).setCaseInsensitiveEnumValuesAllowed(true);
    }

    @Test
    void theBackendRunsOnGpuNodesWithItsRealOptions() throws IOException {
        DaemonSet ds = one(DaemonSet.class);
        PodSpec pod = ds.getSpec().getTemplate().getSpec();
        assertEquals("true", pod.getNodeSelector().get("nvidia.com/gpu.present"));
        Container backend = pod.getContainers().getFirst();
        assertEquals("1", backend.getResources().getLimits().get("nvidia.com/gpu").toString());
        assertNotNull(backend.getReadinessProbe().getExec());
        assertNotNull(backend.getLivenessProbe().getExec());
        assertTrue(backend.getSecurityContext().getReadOnlyRootFilesystem());
        assertFalse(backend.getSecurityContext().getAllowPrivilegeEscalation());
        // The arguments parse with gpusockets' own command line (an option misspelt here fails).
        CommandLine.ParseResult parsed = commandLine().parseArgs(backend.getArgs().toArray(String[]::new));
        CommandLine.ParseResult sub = parsed.subcommand();
        assertEquals("backend", sub.commandSpec().name());
        assertEquals("/etc/gpusockets/tenants.conf", sub.matchedOptionValue("--tenants", null).toString());
        assertEquals("/etc/gpusockets/psk", sub.matchedOptionValue("--psk-file", null).toString());
        String socket = sub.matchedOptionValue("--admin-socket", null).toString();
        // The probes ask the admin socket the backend serves, with options status has.
        for (List<String> probe : List.of(backend.getReadinessProbe().getExec().getCommand(), backend.getLivenessProbe().getExec().getCommand())) {
            String command = String.join(" ", probe);
            assertTrue(command.contains("--socket " + socket), command);
            String status = command.substring(command.indexOf("gpusockets status")).split("\\|")[0].strip();
            commandLine().parseArgs(status.substring("gpusockets ".length()).split(" "));
        }
        CommandLine.ParseResult misspelt = null;
        try {
            misspelt = commandLine().parseArgs("backend", "--tenant", "x");
        } catch (CommandLine.ParameterException expected) {
            // what a misspelt option in the DaemonSet would meet
        }
        assertEquals(null, misspelt, "picocli accepts a misspelt option: the check above proves nothing");
    }

    /** The tenants file parses with the backend's parser, with the Secret's keys beside it as the pod mounts them. */
    @Test
    void theTenantsFileParsesWithTheKeysOfTheSecret() throws Exception {
        ConfigMap tenants = one(ConfigMap.class);
        Secret keys = one(Secret.class);
        for (var e : tenants.getData().entrySet()) {
            Files.writeString(tmp.resolve(e.getKey()), e.getValue());
        }
        for (var e : keys.getStringData().entrySet()) {
            Files.writeString(tmp.resolve(e.getKey()), e.getValue());
        }
        TenantConfig config = TenantConfig.read(tmp.resolve("tenants.conf"));
        assertEquals(List.of("team-a"), config.tenants().stream().map(TenantConfig.Section::name).toList());
        assertEquals("psk:team-a", config.tenants().getFirst().matches().getFirst().toString());
        assertTrue(config.tenants().getFirst().pskKey().length > 0);
        // The DaemonSet mounts both in one projected volume, so the names line up there too.
        DaemonSet ds = one(DaemonSet.class);
        var sources = ds.getSpec().getTemplate().getSpec().getVolumes().stream().filter(v -> v.getProjected() != null)
                .findFirst().orElseThrow().getProjected().getSources();
        assertTrue(sources.stream().anyMatch(s -> s.getConfigMap() != null && s.getConfigMap().getName().equals(tenants.getMetadata().getName())));
        assertTrue(sources.stream().anyMatch(s -> s.getSecret() != null && s.getSecret().getName().equals(keys.getMetadata().getName())));
    }

    @Test
    void theClientFindsTheBackendsThroughTheHeadlessService() throws IOException {
        Deployment client = one(Deployment.class);
        Service svc = one(Service.class);
        PodSpec pod = client.getSpec().getTemplate().getSpec();
        Container program = pod.getContainers().getFirst();
        Map<String, String> env = new HashMap<>();
        for (EnvVar v : program.getEnv()) {
            env.put(v.getName(), v.getValue());
        }
        DnsDiscovery.Target target = DnsDiscovery.parse(env.get("GPUSOCKETS_SERVER"));
        assertEquals(svc.getMetadata().getName() + "." + NAMESPACE + ".svc.cluster.local", target.name());
        assertEquals(svc.getSpec().getPorts().getFirst().getPort(), target.port());
        assertEquals("/gpusockets/lib", env.get("LD_LIBRARY_PATH"));
        assertTrue(program.getResources() == null || program.getResources().getLimits() == null
                || !program.getResources().getLimits().containsKey("nvidia.com/gpu"), "the client asks for no GPU");
        String keyFile = env.get("GPUSOCKETS_PSK_FILE");
        assertTrue(pod.getVolumes().stream().anyMatch(v -> v.getSecret() != null && v.getSecret().getItems().stream()
                .anyMatch(i -> keyFile.endsWith("/" + i.getPath()))), "the PSK file comes from the Secret");
    }
}

package io.gpusockets.deploy;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Namespace;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.dataformat.yaml.YAMLMapper;

/**
 * Reads a Kubernetes manifest into the fabric8 model of its kind, strictly: a field the model does
 * not have fails, wherever it is. fabric8's models keep unknown fields in an
 * {@code additionalProperties} map (@JsonAnySetter) instead of failing, so Jackson's
 * FAIL_ON_UNKNOWN_PROPERTIES alone catches nothing: every such map in the object tree must be empty.
 * Wrong types (a string where an integer goes) fail in Jackson itself.
 */
final class StrictManifests {
    /** The kinds the manifests may hold, each with its apiVersion and model. */
    private record Kind(String apiVersion, Class<? extends HasMetadata> model) {
    }

    private static final Map<String, Kind> KINDS = Map.of(
            "Namespace", new Kind("v1", Namespace.class),
            "ConfigMap", new Kind("v1", ConfigMap.class),
            "Secret", new Kind("v1", Secret.class),
            "Service", new Kind("v1", Service.class),
            "DaemonSet", new Kind("apps/v1", DaemonSet.class),
            "Deployment", new Kind("apps/v1", Deployment.class));

    static final YAMLMapper YAML = YAMLMapper.builder()
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .build();

    private StrictManifests() {
    }

    /** {@code yaml} (one document) as its kind's model; throws IllegalArgumentException saying what is wrong. */
    static HasMetadata read(String yaml, String where) {
        JsonNode tree = YAML.readTree(yaml);
        if (tree == null || !tree.isObject()) {
            throw new IllegalArgumentException(where + ": not a YAML mapping");
        }
        String kindName = tree.path("kind").asString("");
        Kind kind = KINDS.get(kindName);
        if (kind == null) {
            throw new IllegalArgumentException(where + ": kind '" + kindName + "' is none of " + KINDS.keySet());
        }
        if (!kind.apiVersion().equals(tree.path("apiVersion").asString(""))) {
            throw new IllegalArgumentException(where + ": " + kindName + " must have apiVersion " + kind.apiVersion()
                    + ", not '" + tree.path("apiVersion").asString("") + "'");
        }
        HasMetadata object;
        try {
            object = YAML.treeToValue(tree, kind.model());
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
        }
        List<String> unknown = new ArrayList<>();
        unknownFields(object, kindName, unknown, 0);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException(where + ": fields a " + kindName + " does not have: " + String.join("; ", unknown));
        }
        return object;
    }

    /** Adds to {@code found} each non-empty additionalProperties map below {@code o}, with its path. */
    private static void unknownFields(Object o, String path, List<String> found, int depth) {
        if (depth > 64) {
            throw new IllegalStateException("model tree deeper than 64 at " + path);
        }
        switch (o) {
            case null -> {
            }
            case List<?> list -> {
                for (int i = 0; i < list.size(); i++) {
                    unknownFields(list.get(i), path + "[" + i + "]", found, depth + 1);
                }
            }
            case Map<?, ?> map -> {
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    unknownFields(e.getValue(), path + "." + e.getKey(), found, depth + 1);
                }
            }
            default -> {
                if (!o.getClass().getName().startsWith("io.fabric8.")) {
                    return; // String, Integer, Boolean, BigDecimal ...: leaves
                }
                for (Method m : o.getClass().getMethods()) {
                    String name = m.getName();
                    if (m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers()) || !name.startsWith("get")
                            || name.equals("getClass") || m.getReturnType().isPrimitive()) {
                        continue;
                    }
                    Object value = invoke(m, o);
                    if (name.equals("getAdditionalProperties")) {
                        if (value instanceof Map<?, ?> extra && !extra.isEmpty()) {
                            found.add(path + ": " + extra.keySet());
                        }
                    } else {
                        unknownFields(value, path + "." + Character.toLowerCase(name.charAt(3)) + name.substring(4), found, depth + 1);
                    }
                }
            }
        }
    }

    private static Object invoke(Method m, Object o) {
        try {
            return m.invoke(o);
        } catch (IllegalAccessException | InvocationTargetException e) {
            throw new IllegalStateException("cannot read " + m + ": " + e, e);
        }
    }
}

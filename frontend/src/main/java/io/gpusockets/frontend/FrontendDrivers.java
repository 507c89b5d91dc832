package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TlsOptions;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The driver a frontend program (or our libcuda.so.1) uses: one backend as a {@link RemoteCudaDriver},
 * several ({@code GPUSOCKETS_SERVER=uri1,uri2}) merged into one device list by a {@link MultiBackendDriver}.
 * Either way the result is also {@link AutoCloseable}.
 *
 * <p>A {@code dns://NAME:PORT} entry ({@link DnsDiscovery}) is resolved here, at each connect, into one
 * backend per address, sorted, in its place in the list. Such a backend that cannot be reached (a pod
 * that went away while DNS, or the JDK's cache of it, still names it) is left out with a line on
 * stderr, so the program gets the devices of the backends that answer; a backend named by its own URI
 * must answer, as before. Once connected the set is fixed for the life of the driver: CUDA programs
 * take the device count from cuInit onwards, so a backend that goes away later is not replaced or
 * renumbered; calls to its devices and contexts return {@link RemoteCudaDriver#CONNECTION_LOST}
 * (CUDA_ERROR_DEVICE_UNAVAILABLE), the other backends' devices keep their ordinals and work on, and the
 * next connect (a new process) resolves the name again.
 */
public final class FrontendDrivers {
    private FrontendDrivers() {
    }

    /** One backend to connect: its concrete URI and whether it came from DNS (then it may be missing). */
    record Backend(String uri, DnsDiscovery.Target from) {
    }

    /**
     * The backends {@code config} names now: its URIs in order, each {@code dns://} entry replaced by
     * the sorted addresses it resolves to; throws {@link java.net.UnknownHostException} naming a DNS
     * name that resolves to nothing.
     */
    public static List<String> backendUris(FrontendConfig config) throws IOException {
        return backends(config).stream().map(Backend::uri).toList();
    }

    private static List<Backend> backends(FrontendConfig config) throws IOException {
        List<Backend> backends = new ArrayList<>();
        for (String s : config.servers()) {
            if (DnsDiscovery.isDns(s)) {
                DnsDiscovery.Target t = DnsDiscovery.parse(s);
                for (String uri : DnsDiscovery.resolve(t)) {
                    backends.add(new Backend(uri, t));
                }
            } else {
                backends.add(new Backend(s, null));
            }
        }
        return backends;
    }

    /**
     * Connects to every backend of {@code config}; fails, closing what it opened, if one named by its own
     * URI cannot be reached, or if none of a DNS name's addresses can.
     */
    public static CudaDriver connect(FrontendConfig config) throws IOException {
        List<Backend> backends = backends(config);
        if (backends.size() > MultiBackendDriver.MAX_BACKENDS) {
            throw new IllegalArgumentException(FrontendConfig.SERVER_ENV + " names " + backends.size()
                    + " backends" + (backends.size() == config.servers().size() ? "" : " (after DNS)")
                    + "; at most " + MultiBackendDriver.MAX_BACKENDS + " can be merged");
        }
        if (backends.size() == 1 && backends.getFirst().from() == null) {
            return RemoteCudaDriver.connect(config);
        }
        List<RemoteCudaDriver> drivers = new ArrayList<>(backends.size());
        List<DnsDiscovery.Target> answered = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        try {
            for (Backend b : backends) {
                if (b.from() == null) {
                    drivers.add(RemoteCudaDriver.connect(configFor(config, b)));
                    continue;
                }
                try {
                    drivers.add(RemoteCudaDriver.connect(configFor(config, b)));
                    answered.add(b.from());
                } catch (IOException e) {
                    System.err.println("gpusockets: " + b.from() + ": leaving out " + b.uri() + ", which did not answer: "
                            + e.getMessage());
                    missing.add(b.uri() + " (" + e.getMessage() + ")");
                }
            }
            for (Backend b : backends) {
                if (b.from() != null && !answered.contains(b.from())) {
                    throw new IOException(b.from() + ": none of the backends it names answered: " + String.join("; ", missing));
                }
            }
        } catch (IOException | RuntimeException e) {
            drivers.forEach(RemoteCudaDriver::close);
            throw e;
        }
        return drivers.size() == 1 ? drivers.getFirst() : new MultiBackendDriver(drivers);
    }

    /** {@code config} for one backend; a tls:// address found through DNS must prove the DNS name. */
    private static FrontendConfig configFor(FrontendConfig config, Backend b) {
        FrontendConfig one = config.withServers(List.of(b.uri()));
        if (b.from() != null && b.from().transport().equals("tls")) {
            one = one.withTransportOptions(config.transportOptions().with(TlsOptions.SERVER_NAME, b.from().name()));
        }
        return one;
    }

    /** Connects to GPUSOCKETS_SERVER (one URI or several, comma-separated). */
    public static CudaDriver fromEnvironment() throws IOException {
        return connect(FrontendConfig.fromEnvironment(Map.of()));
    }
}

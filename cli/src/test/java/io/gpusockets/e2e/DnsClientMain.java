package io.gpusockets.e2e;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.FrontendDrivers;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.security.Security;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A frontend program in a JVM of its own for {@link DnsDiscoveryTest}, which starts it with
 * {@code -Djdk.net.hosts.file} (read once, when the resolver starts). One command per stdin line, one
 * answer line per command on stdout, starting "ok " or "error ":
 * <ul>
 *   <li>{@code connect}: resolves and connects to {@code GPUSOCKETS_SERVER} (its argument) as a new
 *       driver, calls cuInit, and answers the backend URIs it resolved and the device count;</li>
 *   <li>{@code probe N}: on the N-th driver connected (from 0), the device count and, for each ordinal,
 *       the result of cuDeviceGetName and of a context made on it (CUresult names).</li>
 * </ul>
 */
public final class DnsClientMain {
    private DnsClientMain() {
    }

    public static void main(String[] args) throws Exception {
        // Every connect resolves again: no JDK address cache between two commands (a running frontend
        // caches for networkaddress.cache.ttl, 30 s by default).
        Security.setProperty("networkaddress.cache.ttl", "0");
        Security.setProperty("networkaddress.cache.negative.ttl", "0");
        FrontendConfig config = FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, args[0],
                FrontendConfig.CONNECT_TIMEOUT_ENV, "3000"));
        List<CudaDriver> drivers = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            try {
                String answer = line.startsWith("probe ") ? probe(drivers.get(Integer.parseInt(line.substring(6).strip())))
                        : connect(config, drivers);
                System.out.println("ok " + answer);
            } catch (Exception e) {
                System.out.println("error " + e.getMessage().replace('\n', ' '));
            }
            System.out.flush();
        }
    }

    private static String connect(FrontendConfig config, List<CudaDriver> drivers) throws Exception {
        List<String> uris = FrontendDrivers.backendUris(config);
        CudaDriver d = FrontendDrivers.connect(config);
        drivers.add(d);
        int r = d.cuInit(0);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException("cuInit: " + CuResult.name(r));
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(ValueLayout.JAVA_INT);
            r = d.cuDeviceGetCount(cell);
            return "resolved=" + String.join(",", uris) + " devices=" + (r == 0 ? cell.get(ValueLayout.JAVA_INT, 0) : CuResult.name(r));
        }
    }

    private static String probe(CudaDriver d) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cell = a.allocate(8);
            int r = d.cuDeviceGetCount(cell);
            if (r != CuResult.CUDA_SUCCESS) {
                return "devices=" + CuResult.name(r);
            }
            int n = cell.get(ValueLayout.JAVA_INT, 0);
            StringBuilder b = new StringBuilder("devices=" + n);
            MemorySegment name = a.allocate(256);
            for (int dev = 0; dev < n; dev++) {
                int nameResult = d.cuDeviceGetName(name, 256, dev);
                int ctxResult = d.cuCtxCreate(cell, MemorySegment.NULL, 0, dev);
                if (ctxResult == CuResult.CUDA_SUCCESS) {
                    d.cuCtxDestroy(cell.get(ValueLayout.JAVA_LONG, 0));
                }
                b.append(" dev").append(dev).append('=').append(CuResult.name(nameResult))
                        .append(nameResult == CuResult.CUDA_SUCCESS ? ":" + name.getString(0).replace(' ', '_') : "")
                        .append('/').append(CuResult.name(ctxResult));
            }
            return b.toString();
        }
    }
}

package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.SessionLimits;
import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code gpusockets backend}: serves this machine's GPU (or the emulated device) until stopped. */
@Command(name = "backend", mixinStandardHelpOptions = true,
        description = "Serve the GPU to remote frontends until interrupted (SIGINT/SIGTERM).")
final class BackendCommand implements Callable<Integer> {
    @Option(names = "--listen", paramLabel = "URI",
            description = "Where to listen, repeatable: tcp://HOST:PORT (port 0 = any), tls://HOST:PORT (TLS 1.3, needs --tls-key-store), unix:///PATH, vsock://CID|any:PORT. Default: ${DEFAULT-VALUE}.",
            defaultValue = "tcp://127.0.0.1:7070")
    List<String> listen;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver to serve: native (libcuda.so.1), emulated (no GPU), or auto (native when a GPU is present). Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "libcuda.so.1 to load (default: found by the dynamic loader).")
    String libcuda;

    @Option(names = "--psk-file", paramLabel = "FILE", description = "Require frontends to prove they hold the key in FILE (recommended for tcp).")
    Path pskFile;

    @Option(names = "--allow-uid", paramLabel = "UID", description = "Only these uids may connect over unix:// (repeatable; default: any).")
    Set<Integer> allowUids = Set.of();

    @Option(names = "--allow-cid", paramLabel = "CID", description = "Only these vsock CIDs may connect over vsock:// (repeatable; default: any).")
    Set<Long> allowCids = Set.of();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Option(names = "--tls-key-store", paramLabel = "FILE",
            description = "tls:// listeners: the server's certificate and private key (PKCS12).")
    Path tlsKeyStore;

    @Option(names = "--tls-key-store-password-file", paramLabel = "FILE",
            description = "The file holding --tls-key-store's password (first line).")
    Path tlsKeyStorePasswordFile;

    @Option(names = "--tls-client-ca", paramLabel = "FILE",
            description = "tls:// listeners: ask frontends for a client certificate and verify it against these CA"
                    + " certificates (PEM or PKCS12); its subject is the frontend's identity.")
    Path tlsClientCa;

    @Option(names = "--tls-client-ca-password-file", paramLabel = "FILE",
            description = "The file holding a PKCS12 --tls-client-ca's password.")
    Path tlsClientCaPasswordFile;

    @Option(names = "--tls-require-client-cert", description = "tls:// listeners: refuse frontends without a valid client certificate (needs --tls-client-ca).")
    boolean tlsRequireClientCert;

    @Option(names = "--no-async", description = "Refuse pipelining: every call waits for its reply (debugging).")
    boolean noAsync;

    @Option(names = "--max-lanes", paramLabel = "N", defaultValue = "256", description = "Client threads per session. Default: ${DEFAULT-VALUE}.")
    int maxLanes;

    @Option(names = "--warm-contexts", paramLabel = "N", defaultValue = "0",
            description = "Contexts to keep made ahead per device, so that a session's first context does not wait for the"
                    + " driver to make one (each serves one session, which destroys it). On the H200 only the first session"
                    + " after the backend starts gained (about 50 ms). Default: ${DEFAULT-VALUE}.")
    int warmContexts;

    @Override
    public Integer call() throws Exception {
        if (warmContexts < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--warm-contexts must be 0 or more: " + warmContexts);
        }
        TransportOptions transportOptions = tlsOptions();
        DriverHost host = device.open(libcuda);
        byte[] psk = pskFile == null ? null : Files.readString(pskFile).strip().getBytes(StandardCharsets.UTF_8);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync);
        BackendServer server = new BackendServer(host, BackendSettings.fromSystemProperties().withLimits(limits)
                .withServer(psk, allowUids, allowCids, BackendSettings.HANDSHAKE_MILLIS_DEFAULT, warmContexts));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.close();
            stopped.countDown();
        }, "gpusockets-shutdown"));
        System.out.println("gpusockets backend: " + host.description() + ", " + host.deviceCount() + " device(s)");
        for (String uri : listen) {
            TransportUri bound = server.listen(TransportUri.parse(uri), transportOptions);
            System.out.println("gpusockets backend: listening on " + bound);
        }
        System.out.flush();
        stopped.await();
        return 0;
    }

    /** The --tls-* options for the transports; refused when no --listen is tls:// (they would protect nothing). */
    private TransportOptions tlsOptions() {
        TransportOptions o = TransportOptions.NONE
                .with(TlsOptions.KEY_STORE, tlsKeyStore)
                .with(TlsOptions.KEY_STORE_PASSWORD_FILE, tlsKeyStorePasswordFile)
                .with(TlsOptions.TRUST, tlsClientCa)
                .with(TlsOptions.TRUST_PASSWORD_FILE, tlsClientCaPasswordFile)
                .with(TlsOptions.REQUIRE_CLIENT_CERTIFICATE, tlsRequireClientCert ? Boolean.TRUE : null);
        boolean anyTls = listen.stream().anyMatch(u -> TransportUri.parse(u).scheme().equals("tls"));
        if (!o.isEmpty() && !anyTls) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "--tls-* options are given but no --listen address is tls://HOST:PORT (tcp:// is plaintext)");
        }
        if (anyTls && tlsKeyStore == null) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "a tls:// listener needs --tls-key-store FILE.p12 (its certificate and key)");
        }
        return o;
    }
}

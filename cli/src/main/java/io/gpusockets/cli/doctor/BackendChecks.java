package io.gpusockets.cli.doctor;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.driver.NativeLibrary;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The backend host's checks: the driver loads and shows its GPUs (or the emulated device is what would
 * be served), every listener can bind (bound and released at once), the PSK and TLS files are there,
 * private and parse, the tenants file parses, the admin socket's directory is writable, and for vchan
 * listeners the Xen devices, tools and xenstore paths exist ({@link XenChecks}).
 */
public record BackendChecks(BackendSetup setup, Map<String, String> env) {
    private static final long DRIVER_SECONDS = 60;
    private static final Pattern PSK_FILE_LINE = Pattern.compile("\\s*psk-file\\s*=\\s*([^#]+?)\\s*(#.*)?");

    public List<Check> run() {
        List<Check> out = new ArrayList<>();
        driver(out);
        TransportOptions tls = tls(out);
        listeners(out, tls);
        if (setup.pskFile() != null) {
            out.add(SecretFiles.check("PSK file (--psk-file)", setup.pskFile(), setup.serviceUser(), SecretFiles.MAKE_KEY));
        } else if (setup.listen().stream().anyMatch(BackendChecks::openTcp)) {
            out.add(Check.warn("authentication", "a tcp:// listener on a non-loopback address and no --psk-file: anyone who can"
                    + " reach the port may use the GPU", "pass --psk-file FILE (make it: " + SecretFiles.MAKE_KEY
                    + "), or listen on tls://"));
        }
        tenants(out);
        admin(out);
        return out;
    }

    // ---- driver and GPUs

    private void driver(List<Check> out) {
        String device = setup.device().toLowerCase(Locale.ROOT);
        if (device.equals("emulated")) {
            EmulatedDevice d = new EmulatedDevice();
            out.add(Check.ok("driver", "the emulated device, as --device emulated asks (no GPU is used)"));
            out.add(devices(d, "emulated"));
            return;
        }
        String libcuda = setup.libcuda() != null ? setup.libcuda()
                : System.getProperty(NativeLibrary.PATH_PROP_NAME, NativeLibrary.PATH_DEFAULT);
        Path file = null;
        String how;
        if (libcuda.contains("/")) {
            file = Path.of(libcuda);
            how = "--libcuda";
        } else {
            LoaderSearch.Found f = LoaderSearch.find(libcuda, env);
            file = f.path();
            how = f.how();
        }
        boolean strict = device.equals("native");
        String name = "NVIDIA driver";
        if (file == null || !Files.exists(file)) {
            String found = "no NVIDIA driver: " + libcuda + " not found (" + how + ")";
            String advice = "install the NVIDIA driver (nvidia-smi must work), or pass --libcuda /path/to/libcuda.so.1";
            if (strict) {
                out.add(Check.fail(name, found, advice));
            } else {
                out.add(Check.warn(name, found + ": gpusockets backend would serve the emulated device", advice
                        + "; or pass --device emulated if the emulated device is what you want"));
            }
            return;
        }
        FrontendLibrary.Kind kind = FrontendLibrary.kindOf(file);
        if (kind == FrontendLibrary.Kind.OURS) {
            out.add(Check.fail(name, file + " (" + how + ") is GPUsockets' frontend libcuda.so.1, not NVIDIA's: the backend would"
                    + " forward to itself", "remove " + file.getParent() + " from the backend's LD_LIBRARY_PATH (or from"
                    + " /etc/ld.so.conf.d/gpusockets.conf, then ldconfig), or pass --libcuda /path/to/nvidia/libcuda.so.1"));
            return;
        }
        CompletableFuture<NativeCudaDriver> opening = CompletableFuture.supplyAsync(() -> NativeCudaDriver.open(setup.libcuda()),
                r -> Thread.ofPlatform().daemon().name("gpusockets-doctor-driver").start(r));
        NativeCudaDriver d;
        try {
            d = opening.get(DRIVER_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            out.add(Check.fail(name, "cuInit on " + file + " did not return within " + DRIVER_SECONDS + " s",
                    "check the GPU with nvidia-smi and the kernel log (dmesg | grep -i nvrm)"));
            return;
        } catch (Exception e) {
            Throwable why = e.getCause() != null ? e.getCause() : e;
            String found = "no usable NVIDIA driver at " + file + " (" + kind.words() + "): " + why.getMessage();
            String advice = "check nvidia-smi; the message above names the failing step";
            if (strict) {
                out.add(Check.fail(name, found, advice));
            } else {
                out.add(Check.warn(name, found + "; gpusockets backend would serve the emulated device", advice
                        + "; or pass --device emulated if the emulated device is what you want"));
            }
            return;
        } catch (LinkageError e) {
            out.add(Check.fail(name, "cannot bind " + file + ": " + e, "check nvidia-smi"));
            return;
        }
        out.add(Check.ok(name, d.description()));
        out.add(devices(d, "native"));
    }

    /** cuDeviceGetCount, then each device's name and memory. */
    static Check devices(CudaDriver d, String which) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment n = arena.allocate(ValueLayout.JAVA_LONG);
            int r = d.cuInit(0);
            if (r == CuResult.CUDA_SUCCESS) {
                r = d.cuDeviceGetCount(n);
            }
            if (r != CuResult.CUDA_SUCCESS) {
                return Check.fail("GPUs", "cuDeviceGetCount failed: " + CuResult.name(r), "check nvidia-smi and /dev/nvidia* permissions");
            }
            int count = n.get(ValueLayout.JAVA_INT, 0);
            if (count < 1) {
                return Check.fail("GPUs", "none visible", "check nvidia-smi, CUDA_VISIBLE_DEVICES and /dev/nvidia* permissions");
            }
            List<String> each = new ArrayList<>();
            MemorySegment name = arena.allocate(256);
            for (int i = 0; i < count; i++) {
                r = d.cuDeviceGet(n, i);
                int dev = n.get(ValueLayout.JAVA_INT, 0);
                if (r == CuResult.CUDA_SUCCESS) {
                    r = d.cuDeviceGetName(name, 256, dev);
                }
                String devName = r == CuResult.CUDA_SUCCESS ? name.getString(0) : "? (" + CuResult.name(r) + ")";
                r = d.cuDeviceTotalMem(n, dev);
                long bytes = r == CuResult.CUDA_SUCCESS ? n.get(ValueLayout.JAVA_LONG, 0) : -1;
                each.add(i + ": " + devName + ", " + (bytes < 0 ? "? MiB" : (bytes >> 20) + " MiB"));
            }
            return Check.ok("GPUs", count + " " + which + " device(s): " + String.join("; ", each));
        }
    }

    // ---- listeners

    private TransportOptions tls(List<Check> out) {
        boolean anyTls = setup.listen().stream().anyMatch(u -> u.startsWith("tls://"));
        if (!anyTls) {
            return TransportOptions.NONE;
        }
        if (setup.tlsKeyStore() == null) {
            out.add(Check.fail("TLS key store", "a tls:// listener and no --tls-key-store",
                    "make one (keytool -genkeypair -storetype PKCS12 -keyalg EC -alias gpusockets -dname CN=HOST -keystore"
                            + " server.p12) and pass --tls-key-store server.p12 --tls-key-store-password-file FILE"));
            return TransportOptions.NONE;
        }
        out.addAll(TlsMaterial.check(setup.tlsKeyStore(), setup.tlsKeyStorePasswordFile(), setup.tlsClientCa(),
                setup.tlsClientCaPasswordFile(), setup.serviceUser()));
        return TransportOptions.NONE
                .with(TlsOptions.KEY_STORE, setup.tlsKeyStore())
                .with(TlsOptions.KEY_STORE_PASSWORD_FILE, setup.tlsKeyStorePasswordFile())
                .with(TlsOptions.TRUST, setup.tlsClientCa())
                .with(TlsOptions.TRUST_PASSWORD_FILE, setup.tlsClientCaPasswordFile());
    }

    private void listeners(List<Check> out, TransportOptions tls) {
        for (String text : setup.listen()) {
            String name = "listener " + text;
            TransportUri uri;
            try {
                uri = TransportUri.parse(text);
                Transports.forUri(uri);
            } catch (RuntimeException e) {
                out.add(Check.fail(name, "not a usable address: " + e.getMessage(),
                        "use tcp://HOST:PORT, tls://HOST:PORT, unix:///PATH, vsock://CID|any:PORT, ring:///PATH or vchan://DOMID/PATH"));
                continue;
            }
            if (uri.scheme().equals("vchan")) {
                out.addAll(XenChecks.forListener(uri, env));
                continue;
            }
            out.add(bind(name, uri, uri.scheme().equals("tls") ? tls : TransportOptions.NONE));
        }
        if (setup.metrics() != null) {
            try {
                TransportUri m = TransportUri.parse(setup.metrics());
                out.add(bindTcp("metrics " + setup.metrics(), m.host(), m.port()));
            } catch (RuntimeException e) {
                out.add(Check.fail("metrics " + setup.metrics(), "not tcp://HOST:PORT: " + e.getMessage(), "pass --metrics tcp://HOST:PORT"));
            }
        }
    }

    /** Binds the listener the backend would, and releases it at once. */
    private Check bind(String name, TransportUri uri, TransportOptions options) {
        if (uri.scheme().equals("tcp") || uri.scheme().equals("tls")) {
            Check plain = bindTcp(name, uri.host(), uri.port());
            if (plain.status() != Check.Status.OK || uri.scheme().equals("tcp")) {
                return plain;
            }
        }
        try (Listener l = Transports.listen(uri, options)) {
            return Check.ok(name, "can listen (bound " + l.address() + " and released it)");
        } catch (IllegalArgumentException e) {
            return Check.fail(name, "not a usable address: " + e.getMessage(), "correct this --listen address as the message says");
        } catch (IOException | RuntimeException e) {
            String m = e.getClass().getSimpleName() + ": " + e.getMessage();
            if (uri.scheme().equals("unix")) {
                if (m.contains("a listener accepts on it")) {
                    return inUse(name, uri.path(), PortOwner.unix(uri.path()));
                }
                Path dir = Path.of(uri.path()).getParent();
                if (!Files.isDirectory(dir) || !Files.isWritable(dir)) {
                    return Check.fail(name, "cannot listen: " + m, "make " + dir + " exist and writable by the backend's user"
                            + " (install -d -o " + setup.serviceUser() + " " + dir + ", or systemd's RuntimeDirectory=)");
                }
            }
            if (uri.scheme().equals("vsock")) {
                return Check.fail(name, "cannot listen: " + m, "load the host's vsock module (modprobe vhost_vsock) and check"
                        + " that the port is free (ss -lp --vsock)");
            }
            return Check.fail(name, "cannot listen: " + m, "see the message above");
        }
    }

    private static Check bindTcp(String name, String host, int port) {
        try (ServerSocketChannel s = ServerSocketChannel.open()) {
            s.bind(new InetSocketAddress(host, port));
            return Check.ok(name, "can listen (bound " + s.getLocalAddress() + " and released it)");
        } catch (BindException e) {
            String m = String.valueOf(e.getMessage());
            if (m.contains("in use")) {
                return inUse(name, "port " + port, PortOwner.tcp(port));
            }
            if (m.contains("assign")) {
                return Check.fail(name, host + " is not an address of this host (" + m + ")",
                        "listen on one of this host's addresses (ip -brief addr), or 0.0.0.0 for all");
            }
            if (m.contains("denied")) {
                return Check.fail(name, "port " + port + " needs privileges (" + m + ")", "use a port above 1023");
            }
            return Check.fail(name, "cannot bind: " + m, "choose another address or port");
        } catch (IOException | RuntimeException e) {
            return Check.fail(name, "cannot bind: " + e, "check the address: " + host + ":" + port);
        }
    }

    /**
     * An address someone listens on already: a GPUsockets backend there is most likely this configuration's,
     * running (a warning: doctor on a serving host still exits 0); anything else is a failure.
     */
    private static Check inUse(String name, String what, PortOwner.Holder h) {
        if (h.gpusocketsBackend()) {
            return Check.warn(name, what + " is served by a running GPUsockets backend, " + h.words(),
                    "nothing, if that is this backend (gpusockets status shows it); to check the address itself, stop it"
                            + " first (kill " + h.pid() + " or systemctl stop gpusockets-backend)");
        }
        return Check.fail(name, what + " is in use by " + h.words(), "stop that process, or choose another address in --listen");
    }

    private static boolean openTcp(String uri) {
        try {
            TransportUri u = TransportUri.parse(uri);
            if (!u.scheme().equals("tcp")) {
                return false;
            }
            String h = u.host();
            return !(h.equals("localhost") || h.startsWith("127.") || h.equals("::1") || h.equals("[::1]"));
        } catch (RuntimeException e) {
            return false;
        }
    }

    // ---- tenants, admin socket

    private void tenants(List<Check> out) {
        Path file = setup.tenantsFile();
        if (file == null) {
            return;
        }
        String name = "tenants file (--tenants)";
        TenantConfig config;
        try {
            config = TenantConfig.read(file);
        } catch (java.nio.file.NoSuchFileException e) {
            out.add(Check.fail(name, file + " does not exist", "correct the path, or write the file (README, Tenants)"));
            return;
        } catch (IOException e) {
            out.add(Check.fail(name, "cannot read " + file + ": " + e, "make it readable by " + setup.serviceUser()));
            return;
        } catch (IllegalArgumentException e) {
            out.add(Check.fail(name, "does not parse: " + e.getMessage(), "fix that line (format: README, Tenants); the backend"
                    + " refuses to start with this file, and a SIGHUP keeps the previous tenants"));
            return;
        }
        String refused = io.gpusockets.backend.isolation.Isolation.parse(setup.isolation()).tenantsRefusal(config);
        if (refused != null) {
            out.add(Check.fail(name, refused, "the backend refuses to start with this file in isolation mode "
                    + setup.isolation() + ": add --isolation context, or remove device-share"));
            return;
        }
        List<String> names = config.tenants().stream().map(TenantConfig.Section::name).toList();
        out.add(Check.ok(name, file + ": " + names.size() + " tenant(s) " + names
                + (config.defaults().deny() ? ", others refused" : "")));
        try {
            for (String line : Files.readAllLines(file)) {
                Matcher m = PSK_FILE_LINE.matcher(line);
                if (m.matches()) {
                    Path key = file.toAbsolutePath().getParent().resolve(m.group(1));
                    out.add(SecretFiles.check("tenant key " + m.group(1) + " (psk-file in " + file.getFileName() + ")", key,
                            setup.serviceUser(), SecretFiles.MAKE_KEY));
                }
            }
        } catch (IOException e) {
            // read just above: cannot happen but for a race, which the parse already reported
        }
    }

    private void admin(List<Check> out) {
        Path socket = setup.adminSocket();
        if (socket == null) {
            return;
        }
        String name = "admin socket (--admin-socket)";
        Path dir = socket.toAbsolutePath().getParent();
        if (!Files.isDirectory(dir)) {
            out.add(Check.fail(name, dir + " does not exist", "install -d -m 0755 -o " + setup.serviceUser() + " " + dir
                    + " (a systemd unit: RuntimeDirectory=" + dir.getFileName() + ")"));
        } else if (!Files.isWritable(dir)) {
            out.add(Check.fail(name, dir + " is not writable by " + System.getProperty("user.name"),
                    "chown " + setup.serviceUser() + " " + dir + ", or choose a directory the backend's user may write"));
        } else if (SecretFiles.exists(socket)) {
            out.add(Check.warn(name, socket + " exists: a running backend's, or one left by a crash",
                    "gpusockets status --socket " + socket + " shows whether a backend answers; the backend replaces a stale one"));
        } else {
            out.add(Check.ok(name, dir + " is writable"));
        }
    }
}

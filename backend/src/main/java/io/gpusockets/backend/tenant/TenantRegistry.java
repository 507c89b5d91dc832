package io.gpusockets.backend.tenant;

import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.wire.Handshake;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import javax.security.auth.x500.X500Principal;

/**
 * The backend's tenants: resolves a peer's proven identity to its {@link Tenant} at the handshake and
 * keeps each Tenant (and what it holds) across config reloads. A reload replaces the rules at once:
 * tenants that stay keep their object and get the new limits ({@link Tenant#setLimits}); new ones are
 * made; removed ones keep their running sessions but are refused new ones (their identities are refused
 * until a config names them again). Match order for a peer: a proven PSK identity, then its TLS client
 * certificate subject, uid, vsock CID, vchan domid; a peer none matches gets [default] (or is refused
 * when [default] says deny).
 */
public final class TenantRegistry {
    private static final System.Logger LOG = System.getLogger("gpusockets.tenants");

    /** The outcome of {@link #admit}: the tenant whose session was opened, or why the peer is refused. */
    public record Admission(Tenant tenant, String refusal) {
    }

    /** One config's rules, swapped whole on a reload. */
    private record Rules(TenantConfig config, Map<TenantConfig.Identity, Tenant> byIdentity,
                         Map<X500Principal, Tenant> byCertificate, Map<String, byte[]> keys, Tenant defaults,
                         boolean denyDefault, Map<TenantConfig.Identity, String> retired) {
    }

    private final Map<String, Tenant> tenants = new LinkedHashMap<>();
    /** Admission of kernel launches by the tenants' device-time shares (inactive while none has one). */
    private final DeviceShare deviceShare = new DeviceShare(DeviceShare.WINDOW_DEFAULT);
    private final Tenant defaultTenant;
    private volatile Rules rules;

    public TenantRegistry(TenantConfig config) {
        defaultTenant = new Tenant(TenantConfig.DEFAULT, config.defaults().limits());
        rules = build(config, new HashMap<>());
    }

    /** No tenants file: every peer is the unlimited "default" tenant. */
    public static TenantRegistry unconfigured() {
        return new TenantRegistry(TenantConfig.unlimited());
    }

    /** The file this registry was last loaded from, or null. */
    public Path file() {
        return rules.config().file();
    }

    /** Re-reads {@link #file()}; on a parse or read error keeps the rules in force and returns the reason (else null). */
    public String reload() {
        Path f = file();
        if (f == null) {
            return "no tenants file to reload";
        }
        try {
            TenantConfig config = TenantConfig.read(f);
            String refused = check.apply(config);
            if (refused != null) {
                LOG.log(Level.WARNING, "tenants reload refused, the previous configuration stays in force: " + refused);
                return refused;
            }
            reload(config);
            return null;
        } catch (IOException | IllegalArgumentException e) {
            String why = e instanceof IOException ? f + ": " + e : e.getMessage();
            LOG.log(Level.WARNING, "tenants reload failed, the previous configuration stays in force: " + why);
            return why;
        }
    }

    /** Puts {@code config} in force; sessions running keep running (their tenants get the new limits). */
    public synchronized void reload(TenantConfig config) {
        Rules old = rules;
        Map<TenantConfig.Identity, String> retired = new HashMap<>(old.retired());
        for (Map.Entry<TenantConfig.Identity, Tenant> e : old.byIdentity().entrySet()) {
            retired.put(e.getKey(), e.getValue().name());
        }
        rules = build(config, retired);
        StringBuilder removed = new StringBuilder();
        for (Tenant t : tenants.values()) {
            if (!isConfigured(t.name())) {
                removed.append(removed.isEmpty() ? "" : ", ").append(t.name()).append(" (").append(t.sessions()).append(" session(s) kept)");
            }
        }
        LOG.log(Level.INFO, "tenants reloaded from " + config.file() + ": " + config.tenants().size() + " tenant(s)"
                + (removed.isEmpty() ? "" : "; removed: " + removed));
        for (Runnable r : reloaded) {
            r.run();
        }
    }

    private final java.util.List<Runnable> reloaded = new java.util.concurrent.CopyOnWriteArrayList<>();
    private volatile java.util.function.Function<TenantConfig, String> check = c -> null;

    /**
     * A check a re-read file must pass before {@link #reload()} puts it in force: it returns why the
     * configuration cannot serve this backend (then the previous one stays), or null.
     */
    public void checkReloadsWith(java.util.function.Function<TenantConfig, String> check) {
        this.check = java.util.Objects.requireNonNull(check, "check");
    }

    /** Runs {@code r} after every reload that put a new configuration in force (the tenants have their new limits then). */
    public void onReload(Runnable r) {
        reloaded.add(r);
    }

    private Rules build(TenantConfig config, Map<TenantConfig.Identity, String> retired) {
        Map<TenantConfig.Identity, Tenant> byIdentity = new HashMap<>();
        Map<X500Principal, Tenant> byCert = new HashMap<>();
        Map<String, byte[]> keys = new HashMap<>();
        synchronized (this) {
            for (TenantConfig.Section s : config.tenants()) {
                Tenant t = tenants.get(s.name());
                if (t == null) {
                    t = new Tenant(s.name(), s.limits());
                    tenants.put(s.name(), t);
                } else {
                    t.setLimits(s.limits());
                }
                for (TenantConfig.Identity id : s.matches()) {
                    retired.remove(id);
                    byIdentity.put(id, t);
                    if (id.kind() == TenantConfig.Kind.CERT) {
                        X500Principal p = principal(id.value());
                        if (p != null) {
                            byCert.put(p, t);
                        }
                    } else if (id.kind() == TenantConfig.Kind.PSK) {
                        keys.put(id.value(), s.pskKey());
                    }
                }
            }
            // what a removed tenant may no longer do: open sessions (a handshake that resolved it before the reload)
            java.util.Set<String> names = new java.util.HashSet<>();
            config.tenants().forEach(s -> names.add(s.name()));
            for (Tenant t : tenants.values()) {
                if (!names.contains(t.name())) {
                    TenantLimits l = t.limits();
                    t.setLimits(new TenantLimits(l.memoryBytes(), 0, l.lanes(), l.handles(), l.streams(), l.pinnedBytes(), 0,
                            l.resumeGraceSeconds(), l.stableAddresses()));
                }
            }
            defaultTenant.setLimits(config.defaults().limits());
            Map<String, Double> shares = new HashMap<>();
            for (TenantConfig.Section s : config.tenants()) {
                shares.put(s.name(), s.limits().deviceShare());
            }
            shares.put(TenantConfig.DEFAULT, config.defaults().limits().deviceShare());
            deviceShare.configure(shares);
        }
        return new Rules(config, Map.copyOf(byIdentity), Map.copyOf(byCert), Map.copyOf(keys), defaultTenant,
                config.defaults().deny(), Map.copyOf(retired));
    }

    private boolean isConfigured(String name) {
        for (TenantConfig.Section s : rules.config().tenants()) {
            if (s.name().equals(name)) {
                return true;
            }
        }
        return false;
    }

    private static X500Principal principal(String subject) {
        try {
            return new X500Principal(subject);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /** Whether any tenant has a key of its own (the handshake then asks every peer for a proof). */
    public boolean hasKeys() {
        return !rules.keys().isEmpty();
    }

    /**
     * Whether {@code proof} proves {@code identity}: with that identity's own key where a tenant has one,
     * else with {@code defaultKey} (the backend's --psk-file; null: none, so false).
     */
    public boolean proofMatches(byte[] defaultKey, byte[] nonce, String identity, byte[] proof) {
        byte[] key = rules.keys().get(identity);
        if (key == null) {
            key = defaultKey;
        }
        return key != null && Handshake.proofMatches(key, nonce, identity, proof);
    }

    /**
     * Resolves the peer to its tenant and opens a session on it. {@code pskIdentity}: the hello's identity
     * when the handshake checked its proof ({@link #proofMatches}), else null; it selects a tenant only when
     * it has a key of its own (an identity proven by the shared --psk-file key proves nothing about who).
     */
    public Admission admit(PeerInfo peer, String pskIdentity) {
        Rules r = rules;
        String who = describe(peer, pskIdentity != null && r.keys().containsKey(pskIdentity) ? pskIdentity : null);
        List<TenantConfig.Identity> ids = identities(peer, pskIdentity != null && r.keys().containsKey(pskIdentity)
                ? pskIdentity : null);
        Tenant t = null;
        for (TenantConfig.Identity id : ids) {
            t = id.kind() == TenantConfig.Kind.CERT ? certTenant(r, id.value()) : r.byIdentity().get(id);
            if (t != null) {
                break;
            }
            String gone = r.retired().get(id);
            if (gone != null) {
                return new Admission(null, "tenant " + gone + " (" + id + ") was removed from the backend's tenants");
            }
        }
        if (t == null) {
            if (r.denyDefault()) {
                return new Admission(null, "no tenant matches this peer (" + who + ") and the backend admits no others");
            }
            t = r.defaults();
        }
        if (!t.openSession()) {
            int max = t.limits().sessions();
            return new Admission(null, max == 0 && !t.name().equals(TenantConfig.DEFAULT) && !isConfigured(t.name())
                    ? "tenant " + t.name() + " was removed from the backend's tenants"
                    : "tenant " + t.name() + " is at its limit of " + max + " session(s)");
        }
        return new Admission(t, null);
    }

    private static Tenant certTenant(Rules r, String subject) {
        X500Principal p = principal(subject);
        return p == null ? null : r.byCertificate().get(p);
    }

    /** The peer's proven identities, in match order. */
    static List<TenantConfig.Identity> identities(PeerInfo peer, String pskIdentity) {
        List<TenantConfig.Identity> out = new ArrayList<>();
        if (pskIdentity != null) {
            out.add(new TenantConfig.Identity(TenantConfig.Kind.PSK, pskIdentity));
        }
        Optional<String> cert = peer.certificate();
        cert.ifPresent(s -> out.add(new TenantConfig.Identity(TenantConfig.Kind.CERT, s)));
        OptionalInt uid = peer.uid();
        if (uid.isPresent()) {
            out.add(new TenantConfig.Identity(TenantConfig.Kind.UID, Long.toString(Integer.toUnsignedLong(uid.getAsInt()))));
        }
        OptionalLong cid = peer.cid();
        if (cid.isPresent()) {
            out.add(new TenantConfig.Identity(TenantConfig.Kind.CID, Long.toString(cid.getAsLong())));
        }
        OptionalLong domid = peer.domid();
        if (domid.isPresent()) {
            out.add(new TenantConfig.Identity(TenantConfig.Kind.DOMID, Long.toString(domid.getAsLong())));
        }
        return out;
    }

    private static String describe(PeerInfo peer, String pskIdentity) {
        List<TenantConfig.Identity> ids = identities(peer, pskIdentity);
        return ids.isEmpty() ? "no proven identity" : ids.toString().replace("[", "").replace("]", "");
    }

    /** The launch scheduler of the tenants' device-time shares. */
    public DeviceShare deviceShare() {
        return deviceShare;
    }

    /** The "default" tenant (unmatched peers). */
    public Tenant defaultTenant() {
        return defaultTenant;
    }

    /** Every tenant made so far, configured or removed, then "default"; a snapshot. */
    public synchronized List<Tenant> tenants() {
        List<Tenant> out = new ArrayList<>(tenants.values());
        out.add(defaultTenant);
        return out;
    }

    /** The tenant of that name ("default" included), or null. */
    public synchronized Tenant tenant(String name) {
        return TenantConfig.DEFAULT.equals(name) ? defaultTenant : tenants.get(name);
    }
}

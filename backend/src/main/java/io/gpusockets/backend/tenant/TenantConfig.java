package io.gpusockets.backend.tenant;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A parsed tenants file ({@code gpusockets backend --tenants FILE}): which proven identities belong to
 * which tenant, and each tenant's limits. Owns the file format and its errors (each names file:line);
 * {@link TenantRegistry} owns what the backend does with a parsed config.
 *
 * <pre>
 * # comment lines start with '#'; one setting per line; sizes take B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)
 * [default]                  # peers no tenant matches (optional; without it they are unlimited)
 * memory = 2GiB
 * deny                       # or: refuse every peer no tenant matches
 *
 * [tenant alice]
 * match = uid:1000, psk:alice, cert:CN=alice,O=lab, cid:5, domid:3
 * psk-file = alice.key       # the key psk:alice proves (relative to this file's directory)
 * memory = 8GiB              # device memory over every allocation path
 * sessions = 4               # sessions at once
 * lanes = 64                 # client threads per session
 * handles = 10000            # handles per session
 * streams = 256              # streams per session
 * pinned = 1GiB              # page-locked host memory (the shared window)
 * device-share = 0.5         # share of kernel launch admission when tenants compete, (0, 1]
 * resume-grace = 300         # seconds a session whose connection broke waits to be resumed (0: none);
 *                            # default: the backend's --resume-grace
 * stable-addresses = on      # new sessions get address-stable memory (a checkpoint needs it), on or off;
 *                            # default: the backend's --stable-addresses
 * </pre>
 * A {@code cert:} subject runs up to the next {@code ", kind:"} item, so it may hold commas. Any limit
 * may be {@code unlimited} (the default for a limit not given). A {@code psk:} identity needs a
 * {@code psk-file} in its section: the identity counts as proven only with its own key.
 */
public record TenantConfig(Path file, List<Section> tenants, Section defaults) {
    public static final String DEFAULT = "default";

    /** How a peer's identity was proven. */
    public enum Kind {
        PSK("psk"), CERT("cert"), UID("uid"), CID("cid"), DOMID("domid");

        final String prefix;

        Kind(String prefix) {
            this.prefix = prefix;
        }
    }

    /** One identity of a {@code match =} list: {@code value} is a number for uid, cid and domid. */
    public record Identity(Kind kind, String value) {
        @Override
        public String toString() {
            return kind.prefix + ":" + value;
        }
    }

    /**
     * One section: {@code name} ("default" for [default]), its limits, the identities it matches (none
     * for [default]), the key its psk: identities prove (null without psk-file), and for [default]
     * whether unmatched peers are refused. {@code line}: where the section starts.
     */
    public record Section(String name, TenantLimits limits, List<Identity> matches, byte[] pskKey, boolean deny, int line) {
    }

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{1,64}");
    private static final Pattern ITEM_START = Pattern.compile("\\s*(psk|cert|uid|cid|domid):.*", Pattern.DOTALL);

    /** The first section ([default] last) that gives a device-share, or null when none does. */
    public Section withDeviceShare() {
        for (Section s : tenants) {
            if (s.limits().deviceShare() > 0) {
                return s;
            }
        }
        return defaults.limits().deviceShare() > 0 ? defaults : null;
    }

    /** A config that matches no one and limits no one (the backend without --tenants). */
    public static TenantConfig unlimited() {
        return new TenantConfig(null, List.of(),
                new Section(DEFAULT, TenantLimits.UNLIMITED, List.of(), null, false, 0));
    }

    /** Reads and parses {@code file}; throws {@link IllegalArgumentException} with file:line on bad input. */
    public static TenantConfig read(Path file) throws IOException {
        return parse(file, Files.readString(file, StandardCharsets.UTF_8));
    }

    /** Parses {@code text}, read from {@code file} (which names errors and anchors relative psk-file paths). */
    public static TenantConfig parse(Path file, String text) {
        return new Parser(file).parse(text);
    }

    private static final class Parser {
        private final Path file;
        private final List<Section> tenants = new ArrayList<>();
        private final Map<Identity, String> owners = new HashMap<>();
        private Section defaults;
        // the section being read
        private String name;
        private int start;
        private Map<String, String> values;
        private List<Identity> matches;
        private byte[] key;
        private boolean deny;

        Parser(Path file) {
            this.file = file;
        }

        private IllegalArgumentException error(int line, String message) {
            return new IllegalArgumentException((file == null ? "tenants" : file.toString()) + ":" + line + ": " + message);
        }

        TenantConfig parse(String text) {
            String[] lines = text.split("\r?\n", -1);
            for (int i = 0; i < lines.length; i++) {
                int n = i + 1;
                String line = lines[i].strip();
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                if (line.startsWith("[")) {
                    finish(n);
                    header(n, line);
                } else if (name == null) {
                    throw error(n, "a setting before the first [tenant NAME] or [default] section: " + line);
                } else if (line.equals("deny")) {
                    if (!name.equals(DEFAULT)) {
                        throw error(n, "'deny' belongs in [default] (to refuse a tenant, leave it out of the file)");
                    }
                    deny = true;
                } else {
                    setting(n, line);
                }
            }
            finish(lines.length);
            double shares = 0;
            for (Section s : tenants) {
                shares += s.limits().deviceShare();
            }
            Section d = defaults != null ? defaults : unlimited().defaults();
            shares += d.limits().deviceShare();
            if (shares > 1.0 + 1e-9) {
                throw error(lines.length, "the device-share values add up to " + shares + ", more than 1");
            }
            return new TenantConfig(file, List.copyOf(tenants), d);
        }

        private void header(int n, String line) {
            if (!line.endsWith("]")) {
                throw error(n, "a section header must end with ']': " + line);
            }
            String inner = line.substring(1, line.length() - 1).strip();
            if (inner.equals(DEFAULT)) {
                if (defaults != null) {
                    throw error(n, "a second [default] section (the first is at line " + defaults.line() + ")");
                }
                name = DEFAULT;
            } else if (inner.startsWith("tenant ") || inner.startsWith("tenant\t")) {
                String t = inner.substring(7).strip();
                if (!NAME.matcher(t).matches()) {
                    throw error(n, "tenant name '" + t + "': use 1 to 64 of A-Z a-z 0-9 . _ -");
                }
                if (t.equals(DEFAULT)) {
                    throw error(n, "'default' is the [default] section's name, not a tenant's");
                }
                for (Section s : tenants) {
                    if (s.name().equals(t)) {
                        throw error(n, "tenant " + t + " is defined twice (first at line " + s.line() + ")");
                    }
                }
                name = t;
            } else {
                throw error(n, "unknown section '" + line + "': expected [tenant NAME] or [default]");
            }
            start = n;
            values = new LinkedHashMap<>();
            matches = new ArrayList<>();
            key = null;
            deny = false;
        }

        private void setting(int n, String line) {
            int eq = line.indexOf('=');
            if (eq <= 0) {
                throw error(n, "expected 'key = value': " + line);
            }
            String k = line.substring(0, eq).strip().toLowerCase(Locale.ROOT);
            String v = line.substring(eq + 1).strip();
            if (v.isEmpty()) {
                throw error(n, k + ": no value");
            }
            switch (k) {
                case "match" -> {
                    if (name.equals(DEFAULT)) {
                        throw error(n, "[default] matches every peer no tenant matches: it takes no 'match'");
                    }
                    for (String item : items(v)) {
                        matches.add(identity(n, item));
                    }
                }
                case "psk-file" -> {
                    if (name.equals(DEFAULT)) {
                        throw error(n, "the default tenant's key is the backend's --psk-file");
                    }
                    if (key != null) {
                        throw error(n, "psk-file given twice");
                    }
                    key = readKey(n, v);
                }
                case "memory", "pinned", "sessions", "lanes", "handles", "streams", "device-share", "resume-grace",
                     "stable-addresses" -> {
                    if (values.containsKey(k)) {
                        throw error(n, k + " given twice");
                    }
                    values.put(k, v + "\u0000" + n);
                }
                default -> throw error(n, "unknown setting '" + k + "' (known: match, psk-file, memory, pinned, sessions,"
                        + " lanes, handles, streams, device-share, resume-grace, stable-addresses"
                        + (name.equals(DEFAULT) ? ", deny" : "") + ")");
            }
        }

        /** Splits a match list on commas, keeping a cert subject's own commas (up to the next ", kind:"). */
        private static List<String> items(String v) {
            List<String> out = new ArrayList<>();
            for (String piece : v.split(",", -1)) {
                if (!out.isEmpty() && !ITEM_START.matcher(piece).matches()
                        && out.get(out.size() - 1).stripLeading().startsWith("cert:")) {
                    out.set(out.size() - 1, out.get(out.size() - 1) + "," + piece);
                } else {
                    out.add(piece);
                }
            }
            return out;
        }

        private Identity identity(int n, String item) {
            String s = item.strip();
            int colon = s.indexOf(':');
            String kind = colon < 0 ? s : s.substring(0, colon).strip().toLowerCase(Locale.ROOT);
            String value = colon < 0 ? "" : s.substring(colon + 1).strip();
            Identity id = null;
            for (Kind k : Kind.values()) {
                if (k.prefix.equals(kind)) {
                    if (value.isEmpty()) {
                        throw error(n, "'" + s + "': no value after '" + k.prefix + ":'");
                    }
                    if (k == Kind.UID || k == Kind.CID || k == Kind.DOMID) {
                        try {
                            long x = Long.parseLong(value);
                            if (x < 0 || (k == Kind.UID && x > 0xFFFFFFFFL)) {
                                throw new NumberFormatException();
                            }
                            value = Long.toString(x);
                        } catch (NumberFormatException e) {
                            throw error(n, "'" + s + "': " + k.prefix + " must be a whole number of 0 or more");
                        }
                    }
                    id = new Identity(k, value);
                }
            }
            if (id == null) {
                throw error(n, "'" + s + "': expected uid:N, psk:IDENTITY, cert:SUBJECT, cid:N or domid:N");
            }
            String other = owners.putIfAbsent(id, name);
            if (other != null) {
                throw error(n, id + " already belongs to tenant " + other);
            }
            return id;
        }

        private byte[] readKey(int n, String v) {
            Path p = Path.of(v);
            if (!p.isAbsolute() && file != null && file.toAbsolutePath().getParent() != null) {
                p = file.toAbsolutePath().getParent().resolve(p);
            }
            String k;
            try {
                k = Files.readString(p, StandardCharsets.UTF_8).strip();
            } catch (IOException | RuntimeException e) {
                throw error(n, "psk-file " + p + " cannot be read: " + e.getMessage());
            }
            if (k.isEmpty()) {
                throw error(n, "psk-file " + p + " is empty");
            }
            return k.getBytes(StandardCharsets.UTF_8);
        }

        private void finish(int n) {
            if (name == null) {
                return;
            }
            TenantLimits limits = new TenantLimits(size("memory"), count("sessions", 0), count("lanes", 1),
                    count("handles", 0), count("streams", 0), size("pinned"), share(),
                    grace(), stable());
            if (name.equals(DEFAULT)) {
                defaults = new Section(DEFAULT, limits, List.of(), null, deny, start);
            } else {
                if (matches.isEmpty()) {
                    throw error(start, "tenant " + name + " has no 'match =' line: no peer could ever be it");
                }
                boolean psk = matches.stream().anyMatch(i -> i.kind() == Kind.PSK);
                if (psk && key == null) {
                    throw error(start, "tenant " + name + " matches a psk: identity but has no psk-file (the identity"
                            + " is proven only by a key of its own)");
                }
                if (!psk && key != null) {
                    throw error(start, "tenant " + name + " has a psk-file but matches no psk: identity");
                }
                tenants.add(new Section(name, limits, List.copyOf(matches), key, false, start));
            }
            name = null;
        }

        private String raw(String k) {
            return values.get(k);
        }

        private long size(String k) {
            String rv = raw(k);
            if (rv == null) {
                return Long.MAX_VALUE;
            }
            String v = rv.substring(0, rv.indexOf('\u0000'));
            int n = Integer.parseInt(rv.substring(rv.indexOf('\u0000') + 1));
            try {
                return parseSize(v);
            } catch (IllegalArgumentException e) {
                throw error(n, k + " = " + v + ": " + e.getMessage());
            }
        }

        private int count(String k, int min) {
            String rv = raw(k);
            if (rv == null) {
                return Integer.MAX_VALUE;
            }
            String v = rv.substring(0, rv.indexOf('\u0000'));
            int n = Integer.parseInt(rv.substring(rv.indexOf('\u0000') + 1));
            if (v.equalsIgnoreCase("unlimited")) {
                return Integer.MAX_VALUE;
            }
            try {
                int x = Integer.parseInt(v.replace("_", ""));
                if (x < min) {
                    throw new NumberFormatException();
                }
                return x;
            } catch (NumberFormatException e) {
                throw error(n, k + " = " + v + ": expected a whole number of " + min + " or more, or unlimited");
            }
        }

        private int grace() {
            String rv = raw("resume-grace");
            if (rv == null) {
                return TenantLimits.GRACE_DEFAULT;
            }
            String v = rv.substring(0, rv.indexOf('\u0000'));
            int n = Integer.parseInt(rv.substring(rv.indexOf('\u0000') + 1));
            try {
                int x = Integer.parseInt(v.strip().replace("_", ""));
                if (x < 0 || x > TenantLimits.GRACE_MAX) {
                    throw new NumberFormatException();
                }
                return x;
            } catch (NumberFormatException e) {
                throw error(n, "resume-grace = " + v + ": expected whole seconds from 0 to " + TenantLimits.GRACE_MAX);
            }
        }

        private TenantLimits.Stable stable() {
            String rv = raw("stable-addresses");
            if (rv == null) {
                return TenantLimits.Stable.BACKEND;
            }
            String v = rv.substring(0, rv.indexOf('\u0000'));
            int n = Integer.parseInt(rv.substring(rv.indexOf('\u0000') + 1));
            return switch (v.toLowerCase(Locale.ROOT)) {
                case "on" -> TenantLimits.Stable.ON;
                case "off" -> TenantLimits.Stable.OFF;
                default -> throw error(n, "stable-addresses = " + v + ": expected on or off");
            };
        }

        private double share() {
            String rv = raw("device-share");
            if (rv == null) {
                return 0;
            }
            String v = rv.substring(0, rv.indexOf('\u0000'));
            int n = Integer.parseInt(rv.substring(rv.indexOf('\u0000') + 1));
            try {
                double d = Double.parseDouble(v);
                if (!(d > 0 && d <= 1)) {
                    throw new NumberFormatException();
                }
                return d;
            } catch (NumberFormatException e) {
                throw error(n, "device-share = " + v + ": expected a number in (0, 1]");
            }
        }
    }

    /** "8GiB", "512 MiB", "1GB", "4096", "unlimited" (Long.MAX_VALUE) as bytes. */
    public static long parseSize(String v) {
        String s = v.strip().replace("_", "");
        if (s.equalsIgnoreCase("unlimited")) {
            return Long.MAX_VALUE;
        }
        int i = 0;
        while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '.')) {
            i++;
        }
        if (i == 0) {
            throw new IllegalArgumentException("expected a size such as 8GiB, 512MiB or 4096, or unlimited");
        }
        String unit = s.substring(i).strip().toLowerCase(Locale.ROOT);
        long mult = switch (unit) {
            case "", "b" -> 1L;
            case "kib", "k" -> 1L << 10;
            case "mib", "m" -> 1L << 20;
            case "gib", "g" -> 1L << 30;
            case "tib", "t" -> 1L << 40;
            case "kb" -> 1_000L;
            case "mb" -> 1_000_000L;
            case "gb" -> 1_000_000_000L;
            case "tb" -> 1_000_000_000_000L;
            default -> throw new IllegalArgumentException("unknown unit '" + s.substring(i).strip()
                    + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
        };
        java.math.BigDecimal bytes;
        try {
            bytes = new java.math.BigDecimal(s.substring(0, i)).multiply(java.math.BigDecimal.valueOf(mult));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + s.substring(0, i) + "' is not a number");
        }
        if (bytes.compareTo(java.math.BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
            throw new IllegalArgumentException("too large");
        }
        return bytes.longValue();
    }
}

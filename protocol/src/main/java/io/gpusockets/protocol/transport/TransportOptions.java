package io.gpusockets.protocol.transport;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * Settings a transport needs beyond its address (certificates for {@code tls://}), handed to
 * {@link Transport#connect(TransportUri, java.time.Duration, TransportOptions)} and
 * {@link Transport#listen(TransportUri, TransportOptions)}. Immutable; each value is typed by its
 * {@link Key}, and the keys of a transport are declared in one place ({@link TlsOptions} for tls://), so a
 * caller sets a key with a value of the right type or does not compile.
 *
 * <p>A transport reads only the keys it knows and ignores the rest, so one set of options can be handed
 * to every URI of a configuration (a frontend with a tls:// and a unix:// backend). Whoever builds the
 * options checks that they are used at all (the backend refuses {@code --tls-*} without a tls:// listener).
 */
public final class TransportOptions {
    /** No options: what {@link Transport#connect(TransportUri, java.time.Duration)} uses. */
    public static final TransportOptions NONE = new TransportOptions(Map.of());

    /**
     * One setting: its name (for messages: "scheme.camelCase") and the type of its value.
     *
     * @param <T> the value's type
     */
    public record Key<T>(String name, Class<T> type) {
        public Key {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(type, "type");
        }

        @Override
        public String toString() {
            return name;
        }
    }

    private final Map<Key<?>, Object> values;

    private TransportOptions(Map<Key<?>, Object> values) {
        this.values = values;
    }

    /** These options with {@code key} set to {@code value}; a null value removes the key. */
    public <T> TransportOptions with(Key<T> key, T value) {
        Map<Key<?>, Object> copy = new LinkedHashMap<>(values);
        if (value == null) {
            copy.remove(key);
        } else {
            copy.put(key, key.type().cast(value));
        }
        return new TransportOptions(copy.isEmpty() ? Map.of() : java.util.Collections.unmodifiableMap(copy));
    }

    public <T> Optional<T> get(Key<T> key) {
        return Optional.ofNullable(values.get(key)).map(key.type()::cast);
    }

    /** Whether any key whose name starts with {@code prefix} (e.g. "tls.") is set. */
    public boolean hasAny(String prefix) {
        return values.keySet().stream().anyMatch(k -> k.name().startsWith(prefix));
    }

    public boolean isEmpty() {
        return values.isEmpty();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TransportOptions t && t.values.equals(values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    @Override
    public String toString() {
        return values.entrySet().stream().map(e -> e.getKey().name() + "=" + e.getValue())
                .collect(Collectors.joining(", ", "{", "}"));
    }
}

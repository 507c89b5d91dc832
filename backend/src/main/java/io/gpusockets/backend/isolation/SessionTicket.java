package io.gpusockets.backend.isolation;

import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * What the front process decided at the handshake and a worker needs to serve the session: its id, the
 * features granted, the tenant and its limits, and what the transport proved about the peer. The
 * worker trusts it (it comes from its own front over a private socket), never the frontend.
 */
public record SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer) {

    void encode(ByteBuffer b) {
        b.putLong(sessionId).putInt(features);
        ControlMessages.putString(b, tenant);
        putLimits(b, limits);
        ControlMessages.putString(b, peer.description());
        b.putLong(peer.uid().isPresent() ? peer.uid().getAsInt() : -1);
        b.putLong(peer.cid().isPresent() ? peer.cid().getAsLong() : -1);
        b.putLong(peer.domid().isPresent() ? peer.domid().getAsLong() : -1);
        ControlMessages.putString(b, peer.certificate().orElse(""));
        ControlMessages.putString(b, peer.transport());
    }

    /** A tenant's limits, as SESSION and LIMITS messages carry them. */
    static void putLimits(ByteBuffer b, TenantLimits limits) {
        b.putLong(limits.memoryBytes()).putInt(limits.sessions()).putInt(limits.lanes()).putInt(limits.handles())
                .putInt(limits.streams()).putLong(limits.pinnedBytes()).putDouble(limits.deviceShare());
    }

    static TenantLimits getLimits(ByteBuffer b) {
        return new TenantLimits(b.getLong(), b.getInt(), b.getInt(), b.getInt(), b.getInt(), b.getLong(), b.getDouble());
    }

    static SessionTicket decode(ByteBuffer b) throws IOException {
        try {
            long id = b.getLong();
            int features = b.getInt();
            String tenant = ControlMessages.getString(b);
            TenantLimits limits = getLimits(b);
            String description = ControlMessages.getString(b);
            long uid = b.getLong();
            long cid = b.getLong();
            long domid = b.getLong();
            String certificate = ControlMessages.getString(b);
            String transport = ControlMessages.getString(b);
            PeerInfo peer = new PeerInfo(description, uid < 0 ? OptionalInt.empty() : OptionalInt.of((int) uid),
                    cid < 0 ? OptionalLong.empty() : OptionalLong.of(cid), domid < 0 ? OptionalLong.empty() : OptionalLong.of(domid),
                    certificate.isEmpty() ? Optional.empty() : Optional.of(certificate), transport);
            return new SessionTicket(id, features, tenant, limits, peer);
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            throw new IOException("bad SESSION message: " + e, e);
        }
    }
}

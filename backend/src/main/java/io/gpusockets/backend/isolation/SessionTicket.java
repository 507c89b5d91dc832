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
 * features granted, the tenant and its limits, what the transport proved about the peer, and when the
 * session may be resumed ({@link io.gpusockets.protocol.wire.Handshake#FEATURE_RESUME}) its token, the proven
 * identity the token is bound to, the grace period and the bytes of replies it keeps. The worker trusts it
 * (it comes from its own front over a private socket), never the frontend.
 *
 * @param resumeToken   the session's resume token, empty when resume was not granted
 * @param identity      the proven identity the token is bound to ("" without a token)
 * @param graceSeconds  how long the session waits detached for its frontend
 * @param retainBytes   bytes of unacknowledged replies the session keeps for a resume
 */
public record SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer,
                            byte[] resumeToken, String identity, int graceSeconds, long retainBytes) {

    /** A ticket for a session that is not resumable. */
    public SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer) {
        this(sessionId, features, tenant, limits, peer, new byte[0], "", 0, 0);
    }

    /** Whether the session may be resumed. */
    public boolean resumable() {
        return resumeToken.length > 0;
    }

    /** The same ticket for a resuming connection from {@code next}. */
    SessionTicket withPeer(PeerInfo next) {
        return new SessionTicket(sessionId, features, tenant, limits, next, resumeToken, identity, graceSeconds, retainBytes);
    }

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
        b.putInt(resumeToken.length).put(resumeToken);
        ControlMessages.putString(b, identity);
        b.putInt(graceSeconds).putLong(retainBytes);
    }

    /** A tenant's limits, as SESSION and LIMITS messages carry them. */
    static void putLimits(ByteBuffer b, TenantLimits limits) {
        b.putLong(limits.memoryBytes()).putInt(limits.sessions()).putInt(limits.lanes()).putInt(limits.handles())
                .putInt(limits.streams()).putLong(limits.pinnedBytes()).putDouble(limits.deviceShare())
                .putInt(limits.resumeGraceSeconds());
    }

    static TenantLimits getLimits(ByteBuffer b) {
        return new TenantLimits(b.getLong(), b.getInt(), b.getInt(), b.getInt(), b.getInt(), b.getLong(), b.getDouble(), b.getInt());
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
            int n = b.getInt();
            if (n < 0 || n > 64) {
                throw new IOException("bad SESSION message: a resume token of " + n + " bytes");
            }
            byte[] token = new byte[n];
            b.get(token);
            String identity = ControlMessages.getString(b);
            int grace = b.getInt();
            long retain = b.getLong();
            return new SessionTicket(id, features, tenant, limits, peer, token, identity, grace, retain);
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            throw new IOException("bad SESSION message: " + e, e);
        }
    }
}

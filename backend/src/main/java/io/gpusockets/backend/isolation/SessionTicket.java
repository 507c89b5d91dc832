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
 * features granted, the tenant and its limits, the front's address-stable memory setting, what the transport
 * proved about the peer, and when the
 * session may be resumed ({@link io.gpusockets.protocol.wire.Handshake#FEATURE_RESUME}) its token, the proven
 * identity the token is bound to, the grace period and the bytes of replies it keeps. The worker trusts it
 * (it comes from its own front over a private socket), never the frontend.
 *
 * @param resumeToken   the session's resume token, empty when resume was not granted
 * @param identity      the proven identity the token is bound to ("" without a token)
 * @param graceSeconds  how long the session waits detached for its frontend
 * @param retainBytes   bytes of unacknowledged replies the session keeps for a resume
 * @param stableAddresses the front's {@code --stable-addresses} (address-stable memory for sessions whose tenant's
 *                      {@code stable-addresses} says nothing; the worker's session decides with its tenant's limits)
 * @param managedBase   the guest's managed range the HELLO announced and the front checked and granted
 *                      ({@link io.gpusockets.protocol.wire.Handshake#FEATURE_MANAGED_RANGE}); 0 with size 0: none
 * @param managedSize   its size, 0 for none
 */
public record SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer,
                            byte[] resumeToken, String identity, int graceSeconds, long retainBytes,
                            boolean stableAddresses, long managedBase, long managedSize) {

    /** A ticket for a session that is not resumable, with address-stable memory only where its tenant asks. */
    public SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer) {
        this(sessionId, features, tenant, limits, peer, new byte[0], "", 0, 0, false, 0, 0);
    }

    /** A resumable ticket, with address-stable memory only where its tenant asks. */
    public SessionTicket(long sessionId, int features, String tenant, TenantLimits limits, PeerInfo peer,
                         byte[] resumeToken, String identity, int graceSeconds, long retainBytes) {
        this(sessionId, features, tenant, limits, peer, resumeToken, identity, graceSeconds, retainBytes, false, 0, 0);
    }

    /** The same ticket with the front's {@code --stable-addresses} as {@code on}. */
    public SessionTicket withStableAddresses(boolean on) {
        return new SessionTicket(sessionId, features, tenant, limits, peer, resumeToken, identity, graceSeconds, retainBytes, on,
                managedBase, managedSize);
    }

    /** The same ticket with the guest's managed range {@code [base, base + size)}. */
    public SessionTicket withManagedRange(long base, long size) {
        return new SessionTicket(sessionId, features, tenant, limits, peer, resumeToken, identity, graceSeconds, retainBytes,
                stableAddresses, base, size);
    }

    /** Whether the session may be resumed. */
    public boolean resumable() {
        return resumeToken.length > 0;
    }

    /** The same ticket for a resuming connection from {@code next}. */
    /** The same ticket with the features a resume's handshake granted ({@code Handshake.FEATURE_*}). */
    SessionTicket withFeatures(int granted) {
        return new SessionTicket(sessionId, granted, tenant, limits, peer, resumeToken, identity, graceSeconds, retainBytes,
                stableAddresses, managedBase, managedSize);
    }

    SessionTicket withPeer(PeerInfo next) {
        return new SessionTicket(sessionId, features, tenant, limits, next, resumeToken, identity, graceSeconds, retainBytes,
                stableAddresses, managedBase, managedSize);
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
        b.putInt(graceSeconds).putLong(retainBytes).put((byte) (stableAddresses ? 1 : 0));
        b.putLong(managedBase).putLong(managedSize);
    }

    /** A tenant's limits, as SESSION and LIMITS messages carry them. */
    static void putLimits(ByteBuffer b, TenantLimits limits) {
        b.putLong(limits.memoryBytes()).putInt(limits.sessions()).putInt(limits.lanes()).putInt(limits.handles())
                .putInt(limits.streams()).putLong(limits.pinnedBytes()).putDouble(limits.deviceShare())
                .putInt(limits.resumeGraceSeconds()).put((byte) limits.stableAddresses().ordinal());
    }

    /** @throws IllegalArgumentException on values out of range */
    static TenantLimits getLimits(ByteBuffer b) {
        long memory = b.getLong();
        int sessions = b.getInt(), lanes = b.getInt(), handles = b.getInt(), streams = b.getInt();
        long pinned = b.getLong();
        double share = b.getDouble();
        int grace = b.getInt();
        int stable = b.get();
        if (stable < 0 || stable >= TenantLimits.Stable.values().length) {
            throw new IllegalArgumentException("stableAddresses=" + stable);
        }
        return new TenantLimits(memory, sessions, lanes, handles, streams, pinned, share, grace,
                TenantLimits.Stable.values()[stable]);
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
            byte stable = b.get();
            if (stable != 0 && stable != 1) {
                throw new IOException("bad SESSION message: stableAddresses=" + stable);
            }
            long managedBase = b.getLong(), managedSize = b.getLong();
            String bad = managedSize == 0 && managedBase == 0 ? null
                    : io.gpusockets.protocol.api.ManagedRange.check(managedBase, managedSize);
            if (bad != null) {
                throw new IOException("bad SESSION message: " + bad);
            }
            return new SessionTicket(id, features, tenant, limits, peer, token, identity, grace, retain, stable == 1,
                    managedBase, managedSize);
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            throw new IOException("bad SESSION message: " + e, e);
        }
    }
}

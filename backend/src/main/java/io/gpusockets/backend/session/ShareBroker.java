package io.gpusockets.backend.session;

/**
 * A session's way to the backend's {@link ShareRegistry}: directly where the session is served in the front process
 * (isolation {@code context} and {@code shared}: {@link ShareRegistry#broker}), over the worker's control socket in
 * isolation {@code process} (the worker's SHARE and LOOKUP messages; a VMM share's descriptor, and window memory's
 * descriptors, cross with SCM_RIGHTS).
 * The session's id and tenant are the broker's, never the caller's: a session cannot speak for another.
 */
public interface ShareBroker {
    /**
     * Registers an export of {@code object} (the allocation's address, the VMM handle: what {@link #withdraw} names);
     * returns its 64-byte token. {@code fd} (a VMM share's POSIX descriptor, else -1) is the broker's from here,
     * whatever the outcome.
     */
    byte[] share(byte kind, byte[] driverBytes, long size, int fd, long object) throws ShareRegistry.Refused;

    /** The session let go of {@code object} (an exported allocation's address, VMM handle): its shares go. */
    void withdraw(byte kind, long object);

    /** What {@code token} names for this session ({@link ShareRegistry#lookup}); a descriptor in it is the caller's. */
    ShareRegistry.Found lookup(byte kind, byte[] token) throws ShareRegistry.Refused;

    /**
     * Registers memory of the session's address window ({@link ShareRegistry.Window}: directly in isolation context
     * and shared, with the worker's SHARE in isolation process); its descriptors are the broker's from here, whatever
     * the outcome. Refused by a broker of neither (one without a registry).
     */
    default byte[] shareWindow(long size, ShareRegistry.Window window, long object) throws ShareRegistry.Refused {
        ShareRegistry.closeAll(window);
        throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                "window memory is shared only between sessions of one process");
    }

    /** A new IPC event share of this process (isolation context), counted by the registry. Only where {@link #sameProcess}. */
    default IpcEventShare newEventShare() {
        return new IpcEventShare(new java.util.concurrent.atomic.AtomicInteger());
    }

    /**
     * Registers an IPC event of the session served in this process (isolation context: {@link IpcEventShare}) as
     * {@code object} (its driver event). Only where {@link #sameProcess}.
     */
    default byte[] shareEvent(IpcEventShare events, long object) throws ShareRegistry.Refused {
        throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                "IPC event shares of one process are made only between sessions of one process");
    }

    /**
     * Isolation process, a group restore ({@link GroupCheckpoint#reExportInWorker}): registers again, under its old token
     * ({@code id}, {@code secret}), an export of {@code kind} that the session's image carries, with the driver's new
     * IPC bytes of {@code object}. The front accepts only a token of the image it restores, once.
     */
    default void restoreShare(byte kind, long id, byte[] secret, byte[] driverBytes, long object) throws ShareRegistry.Refused {
        throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                "a share is registered again under its old token by a worker process only");
    }

    /**
     * As {@link #restoreShare} for IPC memory of the session's address window ({@code window}: the physical allocations
     * that back the allocation {@code object} of {@code size} bytes, whose descriptors are the broker's from here,
     * whatever the outcome).
     */
    default void restoreWindow(long id, byte[] secret, long size, ShareRegistry.Window window, long object)
            throws ShareRegistry.Refused {
        ShareRegistry.closeAll(window);
        throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                "a share is registered again under its old token by a worker process only");
    }

    /** Whether every session of the backend runs in this process (isolation context or shared). */
    boolean sameProcess();

    /** A session without one (made outside a backend, e.g. a warm-up): every share is refused. */
    ShareBroker NONE = new ShareBroker() {
        @Override
        public byte[] share(byte kind, byte[] driverBytes, long size, int fd, long object) throws ShareRegistry.Refused {
            if (fd >= 0) {
                io.gpusockets.transport.vsock.DescriptorPassing.close(fd);
            }
            throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "this session is served without a share registry");
        }

        @Override
        public void withdraw(byte kind, long object) {
        }

        @Override
        public ShareRegistry.Found lookup(byte kind, byte[] token) throws ShareRegistry.Refused {
            throw new ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE,
                    "this session is served without a share registry");
        }

        @Override
        public boolean sameProcess() {
            return true;
        }
    };
}

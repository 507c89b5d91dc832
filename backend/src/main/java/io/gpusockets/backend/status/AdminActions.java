package io.gpusockets.backend.status;

import java.nio.file.Path;

/**
 * What the admin socket may ask a backend to do, beyond reading its status: checkpoint a session to a file
 * and restore one from a file (issue 22), migrate one to another backend, hand one over to another backend process on
 * the same GPU, receive such a hand-over, or hand the whole backend to a new one (issue 23). {@link AdminSocket} parses and checks the request, then calls these
 * on the client's own thread; each reports progress as it goes and returns one line of JSON saying what it did.
 * An exception's message is what the client is told (it must name the cause: what could not be captured,
 * which file could not be written, which check of the image failed).
 */
public interface AdminActions {
    /** Progress of a long action: {@code done} of {@code total} units of {@code stage} (total 0: not known). */
    @FunctionalInterface
    interface Progress {
        void progress(String stage, long done, long total);
    }

    /**
     * Checkpoints session {@code session} (its id as {@code status --json} lists it) to {@code file}, an
     * absolute path the backend writes; with {@code stop} the session is left frozen afterwards.
     */
    String checkpoint(long session, Path file, boolean stop, Progress progress) throws Exception;

    /** Restores the session in {@code file} (absolute) into this backend; it then waits for its frontend. */
    String restore(Path file, Progress progress) throws Exception;

    /**
     * Checkpoints the sessions {@code sessions}, which share IPC memory, together to {@code files} (absolute, one each,
     * in order); with {@code stop} they are left frozen. A backend that does not refuses.
     */
    default String checkpointGroup(java.util.List<Long> sessions, java.util.List<Path> files, boolean stop,
                                   Progress progress) throws Exception {
        throw new UnsupportedOperationException("this backend does not checkpoint sessions together");
    }

    /** Restores the sessions of a checkpoint together ({@code files}, absolute) into this backend. */
    default String restoreGroup(java.util.List<Path> files, Progress progress) throws Exception {
        throw new UnsupportedOperationException("this backend does not restore sessions together");
    }

    /**
     * Migrates session {@code session} to the backend listening at {@code targetUri} while its program runs; its
     * frontend is then sent to {@code frontendUri} (null: {@code targetUri}). Neither URI is checked here beyond being
     * one printable word: the backend parses them and refuses what it cannot use.
     */
    String migrate(long session, String targetUri, String frontendUri, Progress progress) throws Exception;

    /**
     * Migrates the sessions {@code sessions}, which share IPC memory or events, together to the backend listening at
     * {@code targetUri}; each frontend is then sent to {@code frontendUri} (null: {@code targetUri}). A backend that
     * does not refuses.
     */
    default String migrateGroup(java.util.List<Long> sessions, String targetUri, String frontendUri, Progress progress)
            throws Exception {
        throw new UnsupportedOperationException("this backend does not migrate sessions together");
    }

    /**
     * Hands session {@code session} over to the backend process whose admin socket is {@code targetAdmin} (absolute),
     * on this host and GPU, with no memory copied (issue 23 item 2): that backend is asked with
     * {@code receive-hand-over}; the frontend is then sent to {@code frontendUri} (null: the address the target
     * answers). A backend that does not hand sessions over refuses.
     */
    default String handOver(long session, Path targetAdmin, String frontendUri, Progress progress) throws Exception {
        throw new UnsupportedOperationException("this backend does not hand sessions over");
    }

    /**
     * Hands the sessions {@code sessions}, which share IPC memory or events, over together to the backend process whose
     * admin socket is {@code targetAdmin}, as {@link #handOver} hands one. A backend that does not refuses.
     */
    default String handOverGroup(java.util.List<Long> sessions, Path targetAdmin, String frontendUri, Progress progress)
            throws Exception {
        throw new UnsupportedOperationException("this backend does not hand sessions over together");
    }

    /**
     * The target's side of a hand-over: connects to the source's descriptor-carrying socket {@code sourceSocket}
     * (absolute) and receives the session; its frontend resumes at {@code frontendUri} (null: this backend's first
     * address). A backend that does not accept migrations refuses.
     */
    default String receiveHandOver(Path sourceSocket, String frontendUri, Progress progress) throws Exception {
        throw new UnsupportedOperationException("this backend does not receive hand-overs");
    }

    /**
     * Hands this backend over to a new one ({@code gpusockets backend --take-over}): the new backend listens on the
     * take-over socket {@code socket} (absolute, owned by {@code requester}, the admin socket's peer) and runs isolation
     * {@code isolation}. Returns one line of JSON saying what was handed (sessions, listeners, bytes sent).
     */
    default String takeOver(Path socket, String isolation, java.nio.file.attribute.UserPrincipal requester) throws Exception {
        throw new UnsupportedOperationException("this backend cannot be taken over");
    }
}

package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.security.auth.x500.X500Principal;

/**
 * A {@link Connection} protected by TLS 1.3: a JDK {@link SSLEngine} over a {@link SocketChannel} (in blocking
 * mode, but while an accepted end's handshakes run: {@link ChannelAccess}).
 * It owns the engine, the ciphertext buffers of both directions and the plaintext a record brought beyond
 * what the reader asked for.
 *
 * <p>Why an engine rather than an {@code SSLSocket}: a write encrypts straight from the caller's gathered
 * buffers (header and body, heap or direct) into one ciphertext buffer of several records that goes to the
 * kernel in one system call, and a read decrypts straight into the caller's buffer, keeping only the tail of
 * the last record; a socket's streams would add a copy into and out of byte arrays on each side.
 *
 * <p>The handshake holds both directions while it runs. A client runs it inside {@code connect}, within
 * the connect timeout, so that a wrong CA or host name fails there. An accepted connection runs it on a
 * virtual thread of its own, started by {@code accept}, which returns at once: a client that never speaks
 * holds no accept loop, and the backend's handshake deadline (which closes the connection) bounds it; a
 * first read or write waits for it and reports its failure. {@link #peer()} names the verified client
 * certificate once the handshake is done (always by the time a read or write has returned).
 *
 * <p>Threading, as {@link SocketConnection}: writers serialized by a lock (each {@code write} stays whole,
 * a failed write closes), one reader at a time. The reader answers TLS's post-handshake messages itself
 * (a KeyUpdate asking for ours takes the write lock briefly). A peer's close_notify, or its socket closing
 * without one, reads as EOF between frames and as a cut within one. {@link #close()} sends close_notify when
 * no writer is inside and the kernel takes it within {@link #CLOSE_NOTIFY_WAIT}; it never blocks longer.
 */
final class TlsConnection implements Connection {
    /** The only protocol either end offers. */
    static final String PROTOCOL = "TLSv1.3";
    /** How long {@link #close()} lets close_notify wait for room in the socket before it cuts the socket anyway. */
    static final Duration CLOSE_NOTIFY_WAIT = Duration.ofMillis(200);
    /** TLS records per ciphertext buffer: bulk data goes to and from the kernel several records at a time. */
    private static final int RECORDS_PER_BUFFER = 4;
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    private final SocketChannel channel;
    /** How the ciphertext reaches the channel (through the reactor while an accepted end's handshakes run). */
    private final ChannelAccess io;
    private final SSLEngine engine;
    private final String description;
    private final ReentrantLock readLock = new ReentrantLock();
    private final ReentrantLock writeLock = new ReentrantLock();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final int packetSize;
    private volatile boolean handshaken;
    private volatile PeerInfo peer;
    /**
     * Reader's: ciphertext received and not yet decrypted (read mode). One record until the handshake is
     * done, so that a connection that never finishes it holds little; then {@link #RECORDS_PER_BUFFER}.
     */
    private ByteBuffer netIn;
    /** Reader's: plaintext decrypted beyond what the last read wanted (read mode). */
    private final ByteBuffer appIn;
    /** Writer's: ciphertext to send; sized as {@link #netIn}. */
    private ByteBuffer netOut;
    /** Ciphertext bytes received during the handshake: none means the peer closed before it began. */
    private long handshakeBytesIn;
    /** Why the handshake failed, for every later read and write. */
    private volatile IOException handshakeFailure;

    private TlsConnection(ChannelAccess io, SSLEngine engine, String description) {
        this.channel = io.channel();
        this.io = io;
        this.engine = engine;
        this.description = description;
        this.peer = PeerInfo.of(description);
        this.packetSize = engine.getSession().getPacketBufferSize();
        this.netIn = ByteBuffer.allocateDirect(packetSize).flip();
        this.netOut = ByteBuffer.allocateDirect(packetSize);
        this.appIn = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize()).flip();
    }

    /**
     * The connecting end: verifies the server's certificate against the context's trust and
     * {@code serverName}, the host of {@code uri} unless {@code TlsOptions.SERVER_NAME} says otherwise
     * (HTTPS endpoint identification: a DNS name or IP address in the certificate's SAN).
     */
    static TlsConnection client(ChannelAccess io, SSLContext context, TransportUri uri, String serverName) throws IOException {
        io.channel().setOption(StandardSocketOptions.TCP_NODELAY, true);
        SSLEngine engine = context.createSSLEngine(serverName, uri.port());
        engine.setUseClientMode(true);
        SSLParameters p = engine.getSSLParameters();
        p.setProtocols(new String[] {PROTOCOL});
        p.setEndpointIdentificationAlgorithm("HTTPS");
        engine.setSSLParameters(p);
        return new TlsConnection(io, engine, uri.toString());
    }

    /** The accepting end, asking for client certificates as {@code clientAuth} says. */
    static TlsConnection server(ChannelAccess io, SSLContext context, TlsContexts.ClientAuth clientAuth) throws IOException {
        SocketChannel channel = io.channel();
        channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
        SSLEngine engine = context.createSSLEngine();
        engine.setUseClientMode(false);
        SSLParameters p = engine.getSSLParameters();
        p.setProtocols(new String[] {PROTOCOL});
        switch (clientAuth) {
            case NONE -> { }
            case WANT -> p.setWantClientAuth(true);
            case NEED -> p.setNeedClientAuth(true);
        }
        engine.setSSLParameters(p);
        String remote = Endpoint.ipText(TlsTransport.TLS, (InetSocketAddress) channel.getRemoteAddress());
        TlsConnection c = new TlsConnection(io, engine, remote);
        Thread.ofVirtual().name("gpusockets-tls-handshake").start(c::handshakeQuietly);
        return c;
    }

    /**
     * Runs the client's handshake, closing the connection if it is not done within {@code timeout}
     * (a {@link java.net.SocketTimeoutException} then).
     */
    void handshakeWithin(Duration timeout) throws IOException {
        java.util.concurrent.CompletableFuture.runAsync(() -> {
            if (!handshaken) {
                handshakeFailure = new java.net.SocketTimeoutException("TLS handshake with " + description
                        + " did not complete within " + timeout.toMillis() + " ms");
                close();
            }
        }, java.util.concurrent.CompletableFuture.delayedExecutor(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS));
        try {
            handshake();
        } catch (IOException e) {
            IOException timedOut = handshakeFailure;
            throw timedOut instanceof java.net.SocketTimeoutException ? timedOut : e;
        }
    }

    private void handshakeQuietly() {
        try {
            handshake();
        } catch (IOException | RuntimeException e) {
            // kept in handshakeFailure for the first read or write
        }
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        handshake();
        writeLock.lock();
        try {
            ensureOpen();
            while (hasRemaining(srcs)) {
                netOut.clear();
                while (netOut.remaining() >= packetSize && hasRemaining(srcs)) {
                    SSLEngineResult r = engine.wrap(srcs, netOut);
                    if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                        throw new IOException("TLS connection closed: " + description);
                    }
                    if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                        if (netOut.position() == 0) {
                            throw new IOException("TLS record larger than " + netOut.capacity() + " bytes: " + description);
                        }
                        break;
                    }
                    if (r.getHandshakeStatus() == HandshakeStatus.NEED_TASK) {
                        runTasks();
                    }
                }
                flush();
            }
        } catch (IOException e) {
            close();
            throw e;
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        handshake();
        readLock.lock();
        try {
            ensureOpen();
            int wanted = dst.remaining();
            while (dst.hasRemaining()) {
                if (appIn.hasRemaining()) {
                    int n = Math.min(appIn.remaining(), dst.remaining());
                    dst.put(dst.position(), appIn, appIn.position(), n);
                    dst.position(dst.position() + n);
                    appIn.position(appIn.position() + n);
                    continue;
                }
                // Straight into the caller's buffer; what the record holds beyond it waits in appIn.
                appIn.clear();
                SSLEngineResult r;
                try {
                    r = engine.unwrap(netIn, new ByteBuffer[] {dst, appIn});
                } finally {
                    appIn.flip();
                }
                switch (r.getStatus()) {
                    case OK -> afterPostHandshakeMessage(r.getHandshakeStatus());
                    case BUFFER_UNDERFLOW -> {
                        if (!fill()) {
                            throw endOfStream(wanted - dst.remaining(), wanted);
                        }
                    }
                    case CLOSED -> throw endOfStream(wanted - dst.remaining(), wanted); // the peer's close_notify
                    case BUFFER_OVERFLOW -> throw new IOException("TLS record larger than the read buffer: " + description);
                }
            }
        } catch (SSLException e) {
            close();
            SSLException named = new SSLException("TLS error on " + description + ": " + e.getMessage());
            named.initCause(e);
            throw named;
        } finally {
            readLock.unlock();
        }
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    /** The TLS handshake is done by then (the backend's own came through it): the socket goes into blocking mode. */
    @Override
    public void platformThreadsOnly() throws IOException {
        io.platformThreadsOnly();
    }

    /** The TCP socket under TLS: its peer's close is this connection's end (never handed over: TLS state is ours). */
    @Override
    public java.util.Optional<SocketChannel> livenessChannel() {
        return java.util.Optional.of(channel);
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        if (handshaken && writeLock.tryLock()) {
            try {
                // A peer that stopped reading leaves no room in the socket: then close without close_notify.
                Thread sender = Thread.ofVirtual().name("gpusockets-tls-close").start(this::sendCloseNotify);
                sender.join(CLOSE_NOTIFY_WAIT);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                closeChannel();
                writeLock.unlock();
            }
        } else {
            closeChannel();
        }
    }

    @Override
    public String toString() {
        return "TlsConnection[" + description + "]";
    }

    // ---- handshake ----

    /** Runs the handshake once, holding both directions; a failure closes the connection and is kept. */
    private void handshake() throws IOException {
        if (handshaken) {
            return;
        }
        readLock.lock();
        writeLock.lock();
        try {
            if (handshaken) {
                return;
            }
            IOException failed = handshakeFailure;
            if (failed != null) {
                throw again(failed);
            }
            ensureOpen();
            runHandshake();
            peer = verifiedPeer();
            // room for several records per system call, now that the peer has proved itself worth it
            netIn = ByteBuffer.allocateDirect(packetSize * RECORDS_PER_BUFFER).put(netIn).flip();
            netOut = ByteBuffer.allocateDirect(packetSize * RECORDS_PER_BUFFER);
            handshaken = true;
        } catch (IOException e) {
            if (handshakeFailure == null) {
                handshakeFailure = e;
            }
            close();
            throw e;
        } catch (RuntimeException e) {
            handshakeFailure = new SSLException("TLS handshake with " + description + " failed: " + e, e);
            close();
            throw e;
        } finally {
            writeLock.unlock();
            readLock.unlock();
        }
    }

    /** The recorded failure thrown again, same type and message, from here. */
    private static IOException again(IOException e) {
        IOException copy = switch (e) {
            case EOFException eof -> new EOFException(eof.getMessage());
            case java.net.SocketTimeoutException t -> new java.net.SocketTimeoutException(t.getMessage());
            case javax.net.ssl.SSLHandshakeException h -> new javax.net.ssl.SSLHandshakeException(h.getMessage());
            case SSLException ssl -> new SSLException(ssl.getMessage());
            default -> new IOException(e.getMessage());
        };
        copy.initCause(e);
        return copy;
    }

    private void runHandshake() throws IOException {
        try {
            engine.beginHandshake();
            HandshakeStatus hs = engine.getHandshakeStatus();
            while (true) {
                switch (hs) {
                    case NEED_WRAP -> hs = wrapHandshake();
                    case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> hs = unwrapHandshake();
                    case NEED_TASK -> hs = runTasks();
                    case FINISHED, NOT_HANDSHAKING -> {
                        return;
                    }
                }
            }
        } catch (SSLException e) {
            sendAlertQuietly();
            throw TlsFailures.handshake(description, e);
        }
    }

    /** Wraps every handshake message the engine has ready, then sends them together. */
    private HandshakeStatus wrapHandshake() throws IOException {
        netOut.clear();
        SSLEngineResult r;
        do {
            r = engine.wrap(EMPTY, netOut);
        } while (r.getStatus() == SSLEngineResult.Status.OK && r.getHandshakeStatus() == HandshakeStatus.NEED_WRAP
                && netOut.remaining() >= packetSize);
        flush();
        if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
            throw new SSLException("the TLS engine closed during the handshake");
        }
        return r.getHandshakeStatus();
    }

    private HandshakeStatus unwrapHandshake() throws IOException {
        appIn.compact();
        SSLEngineResult r;
        try {
            r = engine.unwrap(netIn, appIn);
        } finally {
            appIn.flip();
        }
        switch (r.getStatus()) {
            case BUFFER_UNDERFLOW -> {
                if (!fill()) {
                    if (handshakeBytesIn == 0) {
                        throw new EOFException("peer closed before the TLS handshake: " + description);
                    }
                    throw new SSLException("peer closed during the TLS handshake");
                }
            }
            case CLOSED -> throw new SSLException("peer ended the TLS handshake");
            case BUFFER_OVERFLOW -> throw new SSLException("TLS handshake record larger than the buffer");
            case OK -> { }
        }
        return r.getHandshakeStatus();
    }

    /** The peer with the subject of the client certificate the handshake verified, if it presented one. */
    private PeerInfo verifiedPeer() {
        if (engine.getUseClientMode()) {
            return peer;
        }
        try {
            Certificate[] chain = engine.getSession().getPeerCertificates();
            if (chain.length > 0 && chain[0] instanceof X509Certificate leaf) {
                return peer.withCertificate(leaf.getSubjectX500Principal().getName(X500Principal.RFC2253));
            }
        } catch (SSLPeerUnverifiedException noCertificate) {
            // the client presented none and none was required
        }
        return peer;
    }

    // ---- after the handshake ----

    /** Answers what a post-handshake message (TLS 1.3 NewSessionTicket, KeyUpdate) asks of this end. */
    private void afterPostHandshakeMessage(HandshakeStatus hs) throws IOException {
        while (true) {
            switch (hs) {
                case NEED_TASK -> hs = runTasks();
                case NEED_WRAP -> {
                    writeLock.lock();
                    try {
                        hs = wrapHandshake();
                    } finally {
                        writeLock.unlock();
                    }
                }
                default -> {
                    return;
                }
            }
        }
    }

    private HandshakeStatus runTasks() {
        for (Runnable task; (task = engine.getDelegatedTask()) != null; ) {
            task.run();
        }
        return engine.getHandshakeStatus();
    }

    /** Reads more ciphertext; false at the end of the stream. */
    private boolean fill() throws IOException {
        netIn.compact();
        if (!netIn.hasRemaining()) {
            netIn.flip();
            // the engine asks for more than a whole buffer: a record no TLS 1.3 peer sends; never spin on it
            throw new SSLException("TLS record larger than " + netIn.capacity() + " bytes from " + description);
        }
        int n;
        try {
            n = io.read(netIn);
        } catch (java.net.SocketException e) {
            if (!handshaken && handshakeBytesIn == 0 && !closed.get()) {
                // a server that closes before answering resets the client's unread ClientHello
                throw new EOFException("peer closed before the TLS handshake: " + description + " (" + e.getMessage() + ")");
            }
            throw e;
        } finally {
            netIn.flip();
        }
        if (n > 0 && !handshaken) {
            handshakeBytesIn += n;
        }
        return n >= 0;
    }

    /** Sends what netOut holds (write lock held). */
    private void flush() throws IOException {
        netOut.flip();
        while (netOut.hasRemaining()) {
            io.write(netOut);
        }
    }

    private IOException endOfStream(int got, int wanted) {
        if (got == 0) {
            return new EOFException("peer closed: " + description);
        }
        return new IOException("peer closed mid-read after " + got + " of " + wanted + " bytes: " + description);
    }

    private void ensureOpen() throws IOException {
        if (closed.get()) {
            throw new IOException("connection closed: " + description);
        }
    }

    private static boolean hasRemaining(ByteBuffer[] srcs) {
        for (ByteBuffer b : srcs) {
            if (b.hasRemaining()) {
                return true;
            }
        }
        return false;
    }

    // ---- closing ----

    /** close_notify, so that the peer reads a clean end (runs while close() holds the write lock). */
    private void sendCloseNotify() {
        try {
            engine.closeOutbound();
            netOut.clear();
            while (!engine.isOutboundDone() && netOut.remaining() >= packetSize) {
                if (engine.wrap(EMPTY, netOut).bytesProduced() == 0) {
                    break;
                }
            }
            flush();
        } catch (IOException | RuntimeException e) {
            // the peer is gone or the socket was cut: it sees the end of the stream instead
        }
    }

    /** The alert the engine holds after a failed handshake, so that the peer learns why (best effort). */
    private void sendAlertQuietly() {
        try {
            engine.closeOutbound();
            netOut.clear();
            engine.wrap(EMPTY, netOut);
            flush();
        } catch (IOException | RuntimeException e) {
            // the peer is gone: it sees the end of the stream instead
        }
    }

    private void closeChannel() {
        try {
            io.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
    }
}

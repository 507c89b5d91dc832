package io.gpusockets.protocol.fuzz;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusockets.protocol.calls.GraphRequest;
import io.gpusockets.protocol.calls.HostCallbackOps;
import io.gpusockets.protocol.calls.LaunchConfigRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.calls.LinkCompleteRequest;
import io.gpusockets.protocol.calls.ModuleImageKind;
import io.gpusockets.protocol.calls.PitchedCopyRequest;
import io.gpusockets.protocol.calls.PointerAttributeRequest;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;

/**
 * Coverage-guided fuzzing (Jazzer) of what the backend decodes from a peer before any session logic:
 * the frame layer ({@link FrameChannel}), the handshake messages ({@link Handshake}) and every request
 * codec of the {@code calls} and {@code structs} packages. The properties: arbitrary bytes end only in
 * the errors the callers handle (ProtocolException, EOF/IOException at the connection, and for the
 * request codecs BufferUnderflowException, which the dispatcher turns into a protocol violation), never
 * in another exception; a header is accepted only with a length within the channel's maximum (so no
 * body is allocated from an announced length beyond it); EOF is reported only at a frame boundary; and
 * a request codec allocates no more native scratch than {@link #SCRATCH_BOUND} whatever it is sent.
 *
 * <p>In a normal test run each target runs its seed corpus ({@code WireDecoderFuzzTestInputs/<target>/})
 * as regression tests; with JAZZER_FUZZ=1 one target is fuzzed (README "Fuzzing").
 */
class WireDecoderFuzzTest {
    /** The largest body the fuzzed channel takes: small, so that inputs can reach every branch. */
    static final int MAX_BODY = 4096;
    /** Native scratch one decoded request may use (LaunchRequest's worst case is about 57 KiB). */
    static final int SCRATCH_BOUND = 128 << 10;

    static final AtomicLong FRAME_INPUTS = new AtomicLong();
    static final AtomicLong FRAMES_DECODED = new AtomicLong();
    static final AtomicLong CODEC_INPUTS = new AtomicLong();

    /** The codecs, chosen by an input's first byte (modulo their count); the handshake's come first. */
    enum Codec {
        HELLO, SERVER_HELLO, WELCOME, HANDSHAKE_STRING, LAUNCH_KERNEL, LAUNCH_CONFIG, GRAPH_KERNEL_NODE,
        HOST_CALLBACK, LINK_COMPLETE, PITCHED_COPY, PITCHED_COPY_ASYNC, POINTER_ATTRIBUTE, POINTER_ATTRIBUTES,
        POOL_ATTRIBUTE, MEMCPY3D, MODULE_IMAGE, GRAPH_COUNT
    }

    @AfterAll
    static void report() {
        System.out.println("fuzz WireDecoderFuzzTest: frames target " + FRAME_INPUTS.get() + " inputs ("
                + FRAMES_DECODED.get() + " frames decoded), request codecs target " + CODEC_INPUTS.get() + " inputs");
    }

    /**
     * A byte stream as a peer could send it, read as frames until it ends: each header's length must be
     * within the maximum, each body is decoded as its opcode says (handshake messages) or read or skipped.
     */
    @FuzzTest(maxDuration = "30s")
    void frames(byte[] input) throws IOException {
        FRAME_INPUTS.incrementAndGet();
        BytesConnection c = new BytesConnection(input);
        FrameChannel channel = new FrameChannel(c, MAX_BODY);
        int boundary = 0;
        try {
            while (true) {
                FrameHeader h = channel.readHeader();
                assertTrue(h.length() >= 0 && h.length() <= MAX_BODY, "accepted a header beyond the maximum: " + h);
                switch (h.opcode()) {
                    case Opcodes.HELLO -> Handshake.Hello.decode(channel.readBody(h.length()));
                    case Opcodes.SERVER_HELLO -> Handshake.ServerHello.decode(channel.readBody(h.length()));
                    case Opcodes.WELCOME -> Handshake.Welcome.decode(channel.readBody(h.length()));
                    case Opcodes.REFUSE -> Handshake.readString(channel.readBody(h.length()));
                    case Opcodes.GOODBYE, Opcodes.LANE_END -> channel.skipBody(h.length());
                    default -> {
                        if ((h.requestId() & 1) == 0) {
                            channel.skipBody(h.length());
                        } else {
                            channel.readBody(ByteBuffer.allocate(h.length()));
                        }
                    }
                }
                FRAMES_DECODED.incrementAndGet();
                boundary = c.position();
            }
        } catch (EOFException e) {
            assertEquals(boundary, c.position(), "EOF reported inside a frame");
            assertEquals(input.length, c.position());
        } catch (IOException e) {
            // ProtocolException (a bad length or handshake message) or a cut mid-frame: both close the connection
            if (!(e instanceof ProtocolException)) {
                assertEquals(input.length, c.position(), "a cut reported before the input ended: " + e);
            }
        }
    }

    /** A request body for the codec its first byte names: decoded with a bounded scratch allocator. */
    @FuzzTest(maxDuration = "30s")
    void requestCodecs(byte[] input) {
        CODEC_INPUTS.incrementAndGet();
        if (input.length == 0) {
            return;
        }
        Codec codec = Codec.values()[Byte.toUnsignedInt(input[0]) % Codec.values().length];
        byte[] rest = Arrays.copyOfRange(input, 1, input.length);
        ByteBuffer body = ((input[0] & 0x80) != 0 ? ByteBuffer.allocateDirect(rest.length).put(rest).flip()
                : ByteBuffer.wrap(rest)).order(ByteOrder.LITTLE_ENDIAN);
        try (Arena arena = Arena.ofConfined()) {
            SegmentAllocator scratch = SegmentAllocator.slicingAllocator(arena.allocate(SCRATCH_BOUND, 16));
            decode(codec, body, scratch);
        } catch (ProtocolException e) {
            // refused: the connection is closed as a protocol violation
        } catch (BufferUnderflowException e) {
            // a truncated request: the dispatcher makes it a protocol violation; a handshake decoder must say so itself
            if (codec.ordinal() <= Codec.HANDSHAKE_STRING.ordinal()) {
                throw e;
            }
        }
    }

    private static void decode(Codec codec, ByteBuffer b, SegmentAllocator scratch) throws ProtocolException {
        switch (codec) {
            case HELLO -> Handshake.Hello.decode(b);
            case SERVER_HELLO -> Handshake.ServerHello.decode(b);
            case WELCOME -> Handshake.Welcome.decode(b);
            case HANDSHAKE_STRING -> Handshake.readString(b);
            case LAUNCH_KERNEL -> {
                LaunchRequest.Header h = LaunchRequest.readHeader(b);
                if (h.mode() == LaunchRequest.MODE_KERNEL_PARAMS) {
                    LaunchRequest.readKernelParams(b, scratch);
                } else {
                    LaunchRequest.readExtra(b, scratch);
                }
            }
            case LAUNCH_CONFIG -> {
                LaunchRequest.Header h = LaunchRequest.readHeader(b);
                LaunchConfigRequest.Attributes attrs = LaunchConfigRequest.readAttributes(b, scratch);
                LaunchConfigRequest.config(scratch, h, 0, attrs);
            }
            case GRAPH_KERNEL_NODE -> GraphRequest.readKernelNode(b, scratch);
            case HOST_CALLBACK -> HostCallbackOps.read(b);
            case LINK_COMPLETE -> {
                try {
                    LinkCompleteRequest.read(b);
                } catch (IllegalArgumentException e) {
                    throw new ProtocolException(e.getMessage()); // as LinkCalls does with a short request
                }
            }
            case PITCHED_COPY -> PitchedCopyRequest.read(b, false);
            case PITCHED_COPY_ASYNC -> PitchedCopyRequest.read(b, true);
            case POINTER_ATTRIBUTE -> PointerAttributeRequest.read(b);
            case POINTER_ATTRIBUTES -> PointerAttributeRequest.readSeveral(b);
            case POOL_ATTRIBUTE -> PoolAttributeRequest.read(b);
            case MEMCPY3D -> Memcpy3D.decode(b);
            case MODULE_IMAGE -> {
                // a sized (heap) image, as received: a native one under 16 bytes would be read as a bare C pointer
                byte[] bytes = new byte[b.remaining()];
                b.get(bytes);
                MemorySegment image = MemorySegment.ofArray(bytes);
                if (image.byteSize() > 0) {
                    long n = ModuleImageKind.length(image);
                    assertTrue(n == -1 || (n > 0 && n <= image.byteSize()), "image length outside the image: " + n);
                }
            }
            case GRAPH_COUNT -> GraphRequest.room(b.getLong());
        }
    }
}

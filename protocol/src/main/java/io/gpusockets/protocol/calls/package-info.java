/**
 * The wire layouts of the hand-written (custom) calls, one codec per request, used by both the
 * frontend (encoders) and the backend (decoders): {@link io.gpusockets.protocol.calls.LaunchRequest}
 * (cuLaunchKernel), {@link io.gpusockets.protocol.calls.PointerAttributeRequest}
 * (cuPointerGetAttribute), {@link io.gpusockets.protocol.calls.HostCallbackOps}
 * (cuStreamAddCallback, cuLaunchHostFunc), {@link io.gpusockets.protocol.calls.PitchedCopyRequest}
 * (cuMemcpy2D/3D and Async), {@link io.gpusockets.protocol.calls.ModuleImageKind} (the formats of
 * module images and how far an image extends), {@link io.gpusockets.protocol.calls.LaunchConfigRequest}
 * (cuLaunchKernelEx), {@link io.gpusockets.protocol.calls.PoolAttributeRequest}
 * (cuMemPoolSet/GetAttribute), {@link io.gpusockets.protocol.calls.GraphRequest} (the graph calls with
 * node arrays) and {@link io.gpusockets.protocol.calls.LinkCompleteRequest} (cuLinkComplete).
 *
 * <p>All bodies are little-endian {@link java.nio.ByteBuffer}s. Decoders read a peer's bytes: every
 * count and size is bounded before anything is allocated for it, nothing is read past the body
 * (relative reads, so a truncated body ends in {@link java.nio.BufferUnderflowException}, which the
 * backend's dispatcher reports as a truncated request), and a value out of range is a
 * {@link io.gpusockets.protocol.wire.ProtocolException} whose message names it as {@code name=value}.
 * Decoders leave trailing bytes to the caller, which checks the end of the body itself.
 */
package io.gpusockets.protocol.calls;

/**
 * Module images as the driver reads them, for whoever needs their content: fatbins and their entries
 * ({@link io.gpusockets.protocol.images.FatbinImage}, with the zstd and LZ4 decoders nvcc's compressed
 * entries need), cubin sections, PTX text and its module-scope variables ({@link io.gpusockets.protocol.images.PtxText},
 * {@link io.gpusockets.protocol.images.PtxVariables}), and what loading an image makes the driver
 * allocate ({@link io.gpusockets.protocol.images.ModuleFootprint}). The emulated device runs the PTX it
 * finds here; the backend charges a tenant the footprint before the driver loads the image. Every
 * offset and size is checked against the image (it comes from an untrusted client) and a bad one is an
 * {@link io.gpusockets.protocol.images.ImageError}.
 */
package io.gpusockets.protocol.images;

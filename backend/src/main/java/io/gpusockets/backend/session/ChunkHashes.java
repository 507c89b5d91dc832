package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The hashes {@link ChunkHasher} took of a list of chunks under one seed, and what changed since an earlier list:
 * a migration hashes each chunk when it sends it and again at the stop, and resends the chunks whose hash differs.
 * A chunk is known by its context, address and size, so the lists may differ between rounds (memory allocated since is
 * new, hence changed; memory freed since is simply absent).
 */
public record ChunkHashes(long seed, List<ChunkHasher.Chunk> chunks, long[] hashes) {
    public ChunkHashes {
        if (chunks.size() != hashes.length) {
            throw new IllegalArgumentException("chunks=" + chunks.size() + " hashes=" + hashes.length);
        }
    }

    /** The hash of chunk {@code i}. */
    public long hash(int i) {
        return hashes[i];
    }

    /**
     * The indices (ascending) of this list's chunks that {@code earlier} did not hash, or hashed to another value;
     * never a chunk whose bytes are as they were (equal hashes under one seed). Both must be under one seed.
     */
    public int[] changedSince(ChunkHashes earlier) {
        if (earlier.seed() != seed) {
            throw new IllegalArgumentException("hashes under different seeds cannot be compared");
        }
        Map<ChunkHasher.Chunk, Long> before = new HashMap<>(earlier.chunks().size() * 2);
        for (int i = 0; i < earlier.chunks().size(); i++) {
            before.put(earlier.chunks().get(i), earlier.hash(i));
        }
        List<Integer> changed = new ArrayList<>();
        for (int i = 0; i < chunks.size(); i++) {
            Long h = before.get(chunks.get(i));
            if (h == null || h != hashes[i]) {
                changed.add(i);
            }
        }
        return changed.stream().mapToInt(Integer::intValue).toArray();
    }

    /** The chunks {@link #changedSince} names. */
    public List<ChunkHasher.Chunk> changedChunksSince(ChunkHashes earlier) {
        List<ChunkHasher.Chunk> out = new ArrayList<>();
        for (int i : changedSince(earlier)) {
            out.add(chunks.get(i));
        }
        return out;
    }
}

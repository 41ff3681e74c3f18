package dev.kstreams.compat;

import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * Kafka Streams' bounded-memory recipe (its memory management guide, "RocksDB"):
 * one block cache and one write buffer manager charged to it, shared by every
 * store of the JVM, index and filter blocks kept in the cache, so that block
 * cache, index and filter blocks and memtables together stay within one bound.
 * {@code bench --rocksdb-bound BYTES} sets it for {@code cargo xtask bench compare
 * --rocksdb-bound}, the Kafka Streams side of kstreams'
 * {@code kstreams.rocksdb.bounded.memory.bytes}.
 *
 * <p>Matched to kstreams' bounds (crates/kstreams-state/src/rocks_settings.rs
 * {@code RocksDbMemoryBounds}) where the recipe leaves a choice: half of the bound
 * for memtables ({@code kstreams.rocksdb.bounded.memtable.bytes} unset), half of
 * the cache for index and filter blocks (RocksDB's default high-priority pool, which
 * kstreams keeps), a capacity the cache does not enforce strictly (the guide's
 * choice too: a strict cache that memtables are charged to fails reads once full),
 * each memtable an eighth of the memtables' part (256 KiB to 16 MiB) in arena
 * blocks an eighth of that.
 */
public final class BoundedMemoryRocksDBConfig implements RocksDBConfigSetter {
    /** The bound in bytes, in the Streams configuration ({@code Bench} puts it there). */
    static final String BOUND_BYTES_CONFIG = "kstreams.bench.rocksdb.bounded.memory.bytes";
    /** RocksDB's default share of the cache for high-priority (index and filter) blocks. */
    private static final double INDEX_FILTER_BLOCK_RATIO = 0.5;
    private static final long MIN_WRITE_BUFFER_BYTES = 256L << 10;
    /** Kafka Streams' default write buffer size. */
    private static final long MAX_WRITE_BUFFER_BYTES = 16L << 20;

    /**
     * The cache and write buffer manager every store shares: made by the first
     * store that opens (Kafka Streams makes a setter per store, so they are static),
     * never closed (the JVM's stores use them until it exits).
     */
    private static Shared shared;
    /** Stores configured so far: the harness checks that the setter was used. */
    private static final AtomicInteger STORES = new AtomicInteger();

    private record Shared(long boundBytes, Cache cache, WriteBufferManager writeBuffers, long writeBufferBytes) {}

    private static synchronized Shared shared(long boundBytes) {
        if (shared == null) {
            long memtableBytes = boundBytes / 2;
            Cache cache = new LRUCache(boundBytes, -1, false, INDEX_FILTER_BLOCK_RATIO);
            WriteBufferManager writeBuffers = new WriteBufferManager(memtableBytes, cache);
            long writeBufferBytes = Math.max(MIN_WRITE_BUFFER_BYTES, Math.min(memtableBytes / 8, MAX_WRITE_BUFFER_BYTES));
            shared = new Shared(boundBytes, cache, writeBuffers, writeBufferBytes);
        } else if (shared.boundBytes() != boundBytes) {
            throw new IllegalStateException("one bound per JVM: " + shared.boundBytes() + " then " + boundBytes);
        }
        return shared;
    }

    @Override
    public void setConfig(String storeName, Options options, Map<String, Object> configs) {
        Object bound = configs.get(BOUND_BYTES_CONFIG);
        if (bound == null) {
            throw new IllegalStateException(BOUND_BYTES_CONFIG + " is not set");
        }
        Shared bounds = shared(Long.parseLong(bound.toString()));
        STORES.incrementAndGet();
        // The table options Kafka Streams set up for the store, changed in place
        // so that its other defaults (block size, bloom filter) stay.
        BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
        table.setBlockCache(bounds.cache());
        table.setCacheIndexAndFilterBlocks(true);
        table.setCacheIndexAndFilterBlocksWithHighPriority(true);
        table.setPinTopLevelIndexAndFilter(true);
        options.setWriteBufferManager(bounds.writeBuffers());
        options.setWriteBufferSize(bounds.writeBufferBytes());
        options.setArenaBlockSize(bounds.writeBufferBytes() / 8);
        options.setTableFormatConfig(table);
    }

    /**
     * What the bound held: the stores that opened with it and the shared cache's
     * usage (blocks and the memtables' reservations); fails when no store did,
     * so that a run said to be bounded is.
     */
    static synchronized String summary() throws HarnessException {
        if (shared == null) {
            throw new HarnessException("the RocksDB bound was set but no store opened with it");
        }
        return String.format("RocksDB bound %d bytes: %d stores, cache usage %d bytes (pinned %d)",
                shared.boundBytes(), STORES.get(), shared.cache().getUsage(), shared.cache().getPinnedUsage());
    }

    @Override
    public void close(String storeName, Options options) {
        // Nothing of its own: the cache and write buffer manager are shared.
    }
}

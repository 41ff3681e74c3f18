//! Byte buffers of sent records, kept for the next poll's record copies.

/// The key and value buffers of the records a stream thread has sent,
/// given to the copies of the records it polls next.
///
/// Why: a record outlives its poll, so its key and value are copied out of
/// librdkafka, a poll batch (up to 1 000 records) at a time; and the
/// outputs' buffers are freed once librdkafka has copied them, also in
/// runs of hundreds. glibc's per-thread cache holds 7 chunks per size, so
/// such runs go to its slower bins, which cost many times a push and a pop
/// on a buffer kept here (BENCHMARKS.md, "Stream thread: spare buffers").
/// Keys and values are kept apart, as their sizes differ.
#[derive(Debug, Default)]
pub(crate) struct SpareBuffers {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    /// The capacity of every buffer kept, in bytes.
    held_bytes: usize,
}

/// At most this many buffers of each kind: a poll batch's worth.
const MAX_BUFFERS: usize = 1024;
/// At most this much capacity kept in all, keys and values together
/// (2 MiB: a poll batch of records up to ~2 KiB); beyond, buffers are
/// freed.
const MAX_HELD_BYTES: usize = 2 << 20;
/// A larger buffer is freed, not kept: one big record must not hold its
/// memory until the next big one.
const MAX_BUFFER_CAPACITY: usize = 16 << 10;
/// A kept buffer holds a copy only if it is at most this many times the
/// copy's size (or 64 bytes): a copy may live on as a deserialized value
/// the application keeps, which must not carry a much larger buffer.
const MAX_SLACK: usize = 4;

impl SpareBuffers {
    /// A copy of a record's key, in a kept buffer if there is one.
    pub(super) fn copy_key(&mut self, bytes: &[u8]) -> Vec<u8> {
        copy_into(&mut self.keys, &mut self.held_bytes, bytes)
    }

    /// A copy of a record's value, in a kept buffer if there is one.
    pub(super) fn copy_value(&mut self, bytes: &[u8]) -> Vec<u8> {
        copy_into(&mut self.values, &mut self.held_bytes, bytes)
    }

    /// Keeps a sent record's key buffer (or frees it, past the bounds).
    pub(super) fn keep_key(&mut self, buffer: Vec<u8>) {
        keep(&mut self.keys, &mut self.held_bytes, buffer)
    }

    /// Keeps a sent record's value buffer (or frees it, past the bounds).
    pub(super) fn keep_value(&mut self, buffer: Vec<u8>) {
        keep(&mut self.values, &mut self.held_bytes, buffer)
    }
}

/// A copy of `bytes` in the last kept buffer if it fits them (with no
/// growth, and not much too large); an unfitting one is freed, so that the
/// buffers kept follow the sizes the stream has now. Empty bytes take no
/// buffer (an empty `Vec` allocates nothing).
fn copy_into(kept: &mut Vec<Vec<u8>>, held_bytes: &mut usize, bytes: &[u8]) -> Vec<u8> {
    if bytes.is_empty() {
        return Vec::new();
    }
    if let Some(mut buffer) = kept.pop() {
        *held_bytes -= buffer.capacity();
        let fits = bytes.len() <= buffer.capacity()
            && buffer.capacity() <= MAX_SLACK * bytes.len().max(64);
        if fits {
            buffer.clear();
            buffer.extend_from_slice(bytes);
            return buffer;
        }
    }
    bytes.to_vec()
}

fn keep(kept: &mut Vec<Vec<u8>>, held_bytes: &mut usize, buffer: Vec<u8>) {
    let capacity = buffer.capacity();
    if capacity == 0
        || capacity > MAX_BUFFER_CAPACITY
        || kept.len() >= MAX_BUFFERS
        || *held_bytes + capacity > MAX_HELD_BYTES
    {
        return;
    }
    *held_bytes += capacity;
    kept.push(buffer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_holds_the_next_copy() {
        let mut spare = SpareBuffers::default();
        let sent = Vec::with_capacity(64);
        let address = sent.as_ptr();
        spare.keep_value(sent);
        let copy = spare.copy_value(b"hello");
        assert_eq!(copy, b"hello");
        assert_eq!(copy.as_ptr(), address, "the kept buffer, not a new one");
        assert_eq!(spare.held_bytes, 0);
        let fresh = spare.copy_value(b"again");
        assert_eq!(fresh, b"again", "none kept: a new buffer");
    }

    #[test]
    fn keys_and_values_are_kept_apart() {
        let mut spare = SpareBuffers::default();
        spare.keep_key(Vec::with_capacity(8));
        spare.keep_value(Vec::with_capacity(200));
        assert_eq!(spare.copy_value(&[7; 150]).capacity(), 200);
        assert_eq!(spare.copy_key(b"k").capacity(), 8);
    }

    #[test]
    fn an_unfitting_buffer_is_freed_and_the_copy_gets_its_own() {
        let mut spare = SpareBuffers::default();
        spare.keep_key(Vec::with_capacity(4));
        let copy = spare.copy_key(b"a longer key");
        assert_eq!(copy, b"a longer key");
        assert_eq!(copy.capacity(), 12, "a new buffer of the copy's size");
        assert!(spare.keys.is_empty() && spare.held_bytes == 0);
        spare.keep_value(Vec::with_capacity(4096));
        let small = spare.copy_value(&[1; 100]);
        assert_eq!(small.capacity(), 100, "4 KiB is too large for 100 bytes");
        assert!(spare.values.is_empty() && spare.held_bytes == 0);
    }

    #[test]
    fn empty_bytes_take_no_buffer() {
        let mut spare = SpareBuffers::default();
        spare.keep_value(Vec::with_capacity(64));
        assert_eq!(spare.copy_value(b"").capacity(), 0);
        assert_eq!(spare.values.len(), 1, "kept for the next copy");
    }

    #[test]
    fn buffers_past_the_bounds_are_freed() {
        let mut spare = SpareBuffers::default();
        spare.keep_value(Vec::new());
        spare.keep_value(Vec::with_capacity(MAX_BUFFER_CAPACITY + 1));
        assert!(spare.values.is_empty(), "empty and oversized buffers go");
        for _ in 0..MAX_BUFFERS + 10 {
            spare.keep_key(Vec::with_capacity(16));
        }
        assert_eq!(spare.keys.len(), MAX_BUFFERS);
        let mut spare = SpareBuffers::default();
        let each = MAX_BUFFER_CAPACITY;
        for _ in 0..MAX_HELD_BYTES / each + 5 {
            spare.keep_value(Vec::with_capacity(each));
        }
        assert!(spare.held_bytes <= MAX_HELD_BYTES);
        assert_eq!(spare.values.len(), MAX_HELD_BYTES / each);
    }
}

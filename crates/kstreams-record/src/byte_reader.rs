//! Reading Kafka's internal binary layouts (big-endian numbers,
//! length-prefixed parts), as Java's `ByteBuffer` reads them: each read
//! says `None` once the bytes run out, so malformed input is an error of
//! the caller's choosing, never a panic.

/// A cursor over bytes.
#[derive(Clone, Copy, Debug)]
pub struct ByteReader<'a>(&'a [u8]);

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteReader(bytes)
    }
    /// What is left to read.
    pub fn rest(&self) -> &'a [u8] {
        self.0
    }
    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    /// A big-endian i64.
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A big-endian i32.
    pub fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    /// An i32 length and that many bytes, -1 for null (Kafka's
    /// `Utils.getNullableSizePrefixedArray`); other negative lengths are
    /// malformed.
    pub fn nullable_part(&mut self) -> Option<Option<&'a [u8]>> {
        match self.i32()? {
            -1 => Some(None),
            n => Some(Some(self.take(usize::try_from(n).ok()?)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteReader;

    #[test]
    fn reads_numbers_and_parts_until_the_bytes_run_out() {
        let bytes = [0, 0, 0, 2, b'h', b'i', 255, 255, 255, 255, 0, 0, 0, 9];
        let mut r = ByteReader::new(&bytes);
        assert_eq!(r.nullable_part(), Some(Some(&b"hi"[..])));
        assert_eq!(r.nullable_part(), Some(None));
        assert_eq!(r.nullable_part(), None, "9 bytes announced, none left");
        let mut r = ByteReader::new(&[255, 255, 255, 254]);
        assert_eq!(r.nullable_part(), None, "-2 is no length");
        let mut r = ByteReader::new(&[0, 0, 0, 0, 0, 0, 0, 7, 1]);
        assert_eq!(r.i64(), Some(7));
        assert_eq!(r.i32(), None);
        assert_eq!(r.rest(), &[1]);
    }
}

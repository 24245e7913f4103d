//! The byte pattern every download, upload, request and response carries: position-dependent
//! (from offset 0 on each stream), so a misplaced, missing or extra byte is detected; the
//! receiving side checks every byte.

use crate::quic::{QuicRecv, QuicSend};

/// Bytes read or written at once.
const CHUNK: usize = 64 * 1024;

/// Byte at `offset` of every stream: position-dependent, so a misplaced chunk is detected.
pub fn pattern_byte(offset: u64) -> u8 {
    (offset ^ (offset >> 8) ^ (offset >> 16) ^ (offset >> 24)) as u8
}

/// The offset of the first byte of `data` that is not the pattern, `data` starting at `offset`.
pub fn first_mismatch(offset: u64, data: &[u8]) -> Option<u64> {
    data.iter()
        .enumerate()
        .position(|(i, &b)| b != pattern_byte(offset + i as u64))
        .map(|i| offset + i as u64)
}

/// Write `size` bytes of the pattern (from offset 0).
pub async fn send_pattern<S: QuicSend>(send: &mut S, size: u64) -> Result<(), String> {
    let mut offset = 0u64;
    let mut chunk = Vec::with_capacity(CHUNK);
    while offset < size {
        let n = (size - offset).min(CHUNK as u64);
        chunk.clear();
        chunk.extend((offset..offset + n).map(pattern_byte));
        send.write_all(&chunk).await?;
        offset += n;
    }
    Ok(())
}

/// Checks a stream that must carry exactly `size` bytes of the pattern, fed chunk by chunk.
#[derive(Debug)]
pub struct PatternCheck {
    size: u64,
    pub received: u64,
}

impl PatternCheck {
    pub fn new(size: u64) -> Self {
        PatternCheck { size, received: 0 }
    }

    /// The next bytes in order: an error at the first wrong byte or a byte past `size`.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        if let Some(at) = first_mismatch(self.received, data) {
            if at < self.size {
                return Err(format!("corrupt byte at offset {at}"));
            }
        }
        if self.received + data.len() as u64 > self.size {
            return Err(format!("more than the announced {} bytes", self.size));
        }
        self.received += data.len() as u64;
        Ok(())
    }

    /// The end of the stream: an error if it came early.
    pub fn end(&self) -> Result<u64, String> {
        if self.received != self.size {
            return Err(format!(
                "stream ended after {} of {} bytes",
                self.received, self.size
            ));
        }
        Ok(self.received)
    }
}

/// Read a stream to its end, checking it carries exactly `size` pattern bytes; `first` are bytes
/// of it already read (after a request line); `progress` gets the verified count as it grows.
pub async fn receive_pattern<R: QuicRecv>(
    recv: &mut R,
    first: &[u8],
    size: u64,
    mut progress: impl FnMut(u64),
) -> Result<u64, String> {
    let mut check = PatternCheck::new(size);
    check.feed(first)?;
    loop {
        match recv.read_chunk(CHUNK).await {
            Ok(Some(bytes)) => {
                check.feed(&bytes)?;
                progress(check.received);
            }
            Ok(None) => return check.end(),
            Err(e) => return Err(format!("read after {} bytes: {e}", check.received)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(from: u64, n: u64) -> Vec<u8> {
        (from..from + n).map(pattern_byte).collect()
    }

    #[test]
    fn pattern_check_accepts_exact_data_in_any_chunking() {
        let data = pattern(0, 70_000);
        for cut in [0usize, 1, 255, 256, 65_536, 69_999, 70_000] {
            let mut c = PatternCheck::new(70_000);
            c.feed(&data[..cut]).unwrap();
            c.feed(&data[cut..]).unwrap();
            assert_eq!(c.end(), Ok(70_000));
        }
    }

    #[test]
    fn pattern_check_names_the_corrupt_byte() {
        for at in [0usize, 1, 300, 49_999] {
            let mut data = pattern(0, 50_000);
            data[at] ^= 0x01;
            let mut c = PatternCheck::new(50_000);
            let err = c
                .feed(&data[..1000.min(at + 1)])
                .and_then(|_| c.feed(&data[1000.min(at + 1)..]));
            assert_eq!(err, Err(format!("corrupt byte at offset {at}")));
        }
    }

    #[test]
    fn pattern_check_refuses_short_and_long_streams() {
        let mut c = PatternCheck::new(100);
        c.feed(&pattern(0, 99)).unwrap();
        assert_eq!(c.end(), Err("stream ended after 99 of 100 bytes".into()));
        let mut c = PatternCheck::new(100);
        assert_eq!(
            c.feed(&pattern(0, 101)),
            Err("more than the announced 100 bytes".into())
        );
    }
}

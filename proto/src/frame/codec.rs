//! Encoding and decoding of [`Request`] and [`Reply`]: the decoder tells
//! "need more bytes" from "malformed", and caps every length before it
//! allocates.

use super::*;

impl Request {
    /// Appends this request's frame to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Request::Hello { version } => {
                put_header(dst, K_HELLO, MAGIC.len() + 2);
                dst.put_slice(MAGIC);
                dst.put_u16(*version);
            }
            Request::Stat { path, manifest } => {
                put_header(dst, K_STAT, 1 + 2 + path.len());
                dst.put_u8(u8::from(*manifest));
                put_str(dst, path);
            }
            Request::Start { stream, path, block_size, first, last, dir } => {
                put_header(dst, K_START, 4 + 4 + 8 + 8 + 1 + 2 + path.len());
                dst.put_u32(*stream);
                dst.put_u32(*block_size);
                dst.put_u64(*first);
                dst.put_u64(*last);
                dst.put_u8(match dir {
                    Direction::Increment => 0,
                    Direction::Decrement => 1,
                });
                put_str(dst, path);
            }
            Request::Extend { stream, last } => {
                put_header(dst, K_EXTEND, 12);
                dst.put_u32(*stream);
                dst.put_u64(*last);
            }
            Request::End { stream } => {
                put_header(dst, K_END, 4);
                dst.put_u32(*stream);
            }
            Request::Auth { mac } => {
                put_header(dst, K_AUTH, MAC_LEN);
                dst.put_slice(mac);
            }
            Request::Manifest { path, first, count } => {
                put_header(dst, K_MANIFEST, 8 + 4 + 2 + path.len());
                dst.put_u64(*first);
                dst.put_u32(*count);
                put_str(dst, path);
            }
            Request::Walk { path } => {
                put_header(dst, K_WALK, 2 + path.len());
                put_str(dst, path);
            }
            Request::WalkFiltered { path, rules, xattrs, names, merge, one_fs } => {
                let merged = if merge.is_empty() { 0 } else { 2 + merge.len() };
                let len = 2 + path.len() + 2 + rules.iter().map(|(_, p)| 1 + 2 + p.len()).sum::<usize>() + 1 + merged;
                put_header(dst, K_WALK_FILTERED, len);
                put_str(dst, path);
                dst.put_u16(u16::try_from(rules.len()).expect("rules are capped by their senders"));
                for (include, p) in rules {
                    dst.put_u8(u8::from(*include));
                    put_str(dst, p);
                }
                let flags = u8::from(*xattrs) | u8::from(*names) << 1 | u8::from(!merge.is_empty()) << 2;
                dst.put_u8(flags | u8::from(*one_fs > 0) << 3 | u8::from(*one_fs > 1) << 4);
                if !merge.is_empty() {
                    put_str(dst, merge);
                }
            }
            Request::Bundle { data } => {
                assert!(data.len() <= MAX_BUNDLE_CHUNK, "bundle pieces are capped");
                put_header(dst, K_BUNDLE, data.len());
                dst.put_slice(data);
            }
            Request::BundleEnd => put_header(dst, K_BUNDLE_END, 0),
            Request::Seals { path, block_size, first, count } => {
                put_header(dst, K_SEALS, 4 + 8 + 4 + 2 + path.len());
                dst.put_u32(*block_size);
                dst.put_u64(*first);
                dst.put_u32(*count);
                put_str(dst, path);
            }
            Request::WeakSums { path, first, count } => {
                put_header(dst, K_WEAK_SUMS, 8 + 4 + 2 + path.len());
                dst.put_u64(*first);
                dst.put_u32(*count);
                put_str(dst, path);
            }
            Request::Tell { path } => {
                put_header(dst, K_TELL, 2 + path.len());
                put_str(dst, path);
            }
        }
    }

    /// Takes one request off the front of `src`: `Ok(None)` if more bytes are
    /// needed, `Err` if the bytes can never be a valid request.
    pub fn decode(src: &mut BytesMut) -> Result<Option<Request>, ProtoError> {
        let Some((kind, len)) = peek_header(src, |k| match k {
            K_HELLO | K_STAT | K_START | K_EXTEND | K_END | K_AUTH | K_MANIFEST | K_WALK | K_WALK_FILTERED
            | K_BUNDLE_END | K_SEALS | K_WEAK_SUMS | K_TELL => Some(MAX_CONTROL_BODY),
            K_BUNDLE => Some(MAX_BUNDLE_CHUNK),
            _ => None,
        })?
        else {
            return Ok(None);
        };
        if src.len() < HEADER_LEN + len {
            src.reserve(HEADER_LEN + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let body = src.split_to(len).freeze();
        let mut r = Reader { buf: body, kind };
        let req = match kind {
            K_HELLO => {
                if r.bytes(MAGIC.len())?.as_ref() != MAGIC {
                    return Err(ProtoError::BadMagic);
                }
                Request::Hello { version: r.u16()? }
            }
            K_STAT => {
                let manifest = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(ProtoError::Malformed { kind, why: "manifest flag must be 0 or 1" }),
                };
                Request::Stat { path: r.path()?, manifest }
            }
            K_START => {
                let stream = r.u32()?;
                let block_size = r.u32()?;
                let first = r.u64()?;
                let last = r.u64()?;
                let dir = match r.u8()? {
                    0 => Direction::Increment,
                    1 => Direction::Decrement,
                    _ => return Err(ProtoError::Malformed { kind, why: "direction must be 0 or 1" }),
                };
                if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
                    return Err(ProtoError::Malformed { kind, why: "block size out of range" });
                }
                Request::Start { stream, path: r.path()?, block_size, first, last, dir }
            }
            K_EXTEND => Request::Extend { stream: r.u32()?, last: r.u64()? },
            K_END => Request::End { stream: r.u32()? },
            K_AUTH => Request::Auth { mac: r.array()? },
            K_MANIFEST => {
                let first = r.u64()?;
                let count = r.u32()?;
                if count == 0 || count > MAX_MANIFEST_HASHES {
                    return Err(ProtoError::Malformed { kind, why: "manifest count out of range" });
                }
                Request::Manifest { path: r.path()?, first, count }
            }
            K_WALK => Request::Walk { path: r.path()? },
            K_WALK_FILTERED => {
                let path = r.path()?;
                let n = r.u16()?;
                if usize::from(n) > MAX_WALK_RULES {
                    return Err(ProtoError::Malformed { kind, why: "too many rules" });
                }
                let mut rules = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    let include = match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return Err(ProtoError::Malformed { kind, why: "a rule is 0 (exclude) or 1 (include)" }),
                    };
                    rules.push((include, r.path()?));
                }
                let flags = r.u8()?;
                if flags > 31 || flags & 24 == 16 {
                    return Err(ProtoError::Malformed { kind, why: "unknown walk flags" });
                }
                let merge = match flags & 4 != 0 {
                    true => r.path()?,
                    false => String::new(),
                };
                // Several names `/`-separated (protocol 10), each plain.
                let plain = |n: &str| !n.is_empty() && n != "." && n != "..";
                if flags & 4 != 0 && !merge.split('/').all(plain) {
                    return Err(ProtoError::Malformed { kind, why: "a merge file's name is a plain name" });
                }
                let (xattrs, names) = (flags & 1 != 0, flags & 2 != 0);
                // `-x`, and `-xx` (protocol 10) with it.
                let one_fs = u8::from(flags & 8 != 0) + u8::from(flags & 16 != 0);
                Request::WalkFiltered { path, rules, xattrs, names, merge, one_fs }
            }
            K_BUNDLE => {
                let n = r.buf.len();
                Request::Bundle { data: r.bytes(n)? }
            }
            K_BUNDLE_END => Request::BundleEnd,
            K_SEALS => {
                let block_size = r.u32()?;
                let first = r.u64()?;
                let count = r.u32()?;
                if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
                    return Err(ProtoError::Malformed { kind, why: "block size out of range" });
                }
                if count == 0 || count > MAX_MANIFEST_HASHES {
                    return Err(ProtoError::Malformed { kind, why: "seal count out of range" });
                }
                if u64::from(count) * u64::from(block_size) > MAX_SEALS_BYTES {
                    return Err(ProtoError::Malformed { kind, why: "seals of more than 256 MiB of blocks" });
                }
                Request::Seals { path: r.path()?, block_size, first, count }
            }
            K_WEAK_SUMS => {
                let first = r.u64()?;
                let count = r.u32()?;
                if count == 0 || count > MAX_MANIFEST_HASHES {
                    return Err(ProtoError::Malformed { kind, why: "weak sum count out of range" });
                }
                Request::WeakSums { path: r.path()?, first, count }
            }
            K_TELL => Request::Tell { path: r.path()? },
            _ => unreachable!("kinds were filtered by peek_header"),
        };
        r.finish()?;
        Ok(Some(req))
    }
}

impl Reply {
    /// Appends this reply's frame to `dst` (blocks included, for tests and
    /// small payloads; servers send blocks with [`put_block_header`]).
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Reply::Hello { version, server_id, max_block_size } => {
                put_header(dst, K_R_HELLO, MAGIC.len() + 2 + SERVER_ID_LEN + 4);
                dst.put_slice(MAGIC);
                dst.put_u16(*version);
                dst.put_slice(server_id);
                dst.put_u32(*max_block_size);
            }
            Reply::Stat { size, mtime_secs, mtime_nanos, digest } => {
                put_header(dst, K_R_STAT, 24 + 2 * HASH_LEN);
                dst.put_u64(*size);
                dst.put_i64(*mtime_secs);
                dst.put_u32(*mtime_nanos);
                dst.put_u32(digest.chunk_size);
                dst.put_slice(&digest.sha256);
                dst.put_slice(&digest.manifest);
            }
            Reply::Manifest { first, hashes } => {
                assert!(hashes.len() <= MAX_MANIFEST_HASHES as usize, "manifest replies are capped");
                put_header(dst, K_R_MANIFEST, 8 + HASH_LEN * hashes.len());
                dst.put_u64(*first);
                for h in hashes {
                    dst.put_slice(h);
                }
            }
            Reply::WeakSums { first, sums } => {
                assert!(sums.len() <= MAX_MANIFEST_HASHES as usize, "weak sum replies are capped");
                put_header(dst, K_R_WEAK_SUMS, 8 + 4 * sums.len());
                dst.put_u64(*first);
                for s in sums {
                    dst.put_u32(*s);
                }
            }
            Reply::Block { stream, block, payload } => {
                put_header(dst, K_R_BLOCK, BLOCK_PREFIX_LEN + payload.len());
                dst.put_u32(*stream);
                dst.put_u64(*block);
                dst.put_slice(payload);
            }
            Reply::SealedBlock { stream, block, hash, payload } => {
                put_header(dst, K_R_SEALED_BLOCK, SEALED_PREFIX_LEN + payload.len());
                dst.put_u32(*stream);
                dst.put_u64(*block);
                dst.put_slice(hash);
                dst.put_slice(payload);
            }
            Reply::Waiting { stream } => {
                put_header(dst, K_R_WAITING, 4);
                dst.put_u32(*stream);
            }
            Reply::Fetching { at, len, dir } => {
                put_header(dst, K_R_FETCHING, 17);
                dst.put_u64(*at);
                dst.put_u64(*len);
                dst.put_u8(u8::from(*dir == Direction::Decrement));
            }
            Reply::Stopped { stream, sent } => {
                put_header(dst, K_R_STOPPED, 12);
                dst.put_u32(*stream);
                dst.put_u64(*sent);
            }
            Reply::Error { code, message } => {
                let message = truncate(message, MAX_CONTROL_BODY - 4);
                put_header(dst, K_R_ERROR, 4 + message.len());
                dst.put_u16(code.to_u16());
                put_str(dst, message);
            }
            Reply::Challenge { nonce } => {
                put_header(dst, K_R_CHALLENGE, NONCE_LEN);
                dst.put_slice(nonce);
            }
            Reply::Bundle { name, size } => {
                put_header(dst, K_R_BUNDLE, 8 + 2 + name.len());
                dst.put_u64(*size);
                put_str(dst, name);
            }
            Reply::ListData { data } => {
                assert!(data.len() <= MAX_LIST_CHUNK, "list pieces are capped");
                put_header(dst, K_R_LIST_DATA, data.len());
                dst.put_slice(data);
            }
            Reply::Unreadable { index, message } => {
                let message = truncate(message, MAX_CONTROL_BODY - 10);
                put_header(dst, K_R_UNREADABLE, 8 + 2 + message.len());
                dst.put_u64(*index);
                put_str(dst, message);
            }
            Reply::WalkError { path, message } => {
                let path = truncate(path, MAX_CONTROL_BODY / 2);
                let message = truncate(message, MAX_CONTROL_BODY / 2 - 4);
                put_header(dst, K_R_WALK_ERROR, 4 + path.len() + message.len());
                put_str(dst, path);
                put_str(dst, message);
            }
            Reply::ListEnd { errors } => {
                put_header(dst, K_R_LIST_END, 8);
                dst.put_u64(*errors);
            }
        }
    }

    /// Takes one reply off the front of `src` (see [`Request::decode`]). A
    /// block's payload is split off `src` without copying.
    pub fn decode(src: &mut BytesMut) -> Result<Option<Reply>, ProtoError> {
        let Some((kind, len)) = peek_header(src, |k| match k {
            K_R_HELLO | K_R_STAT | K_R_STOPPED | K_R_WAITING | K_R_ERROR | K_R_CHALLENGE | K_R_BUNDLE
            | K_R_LIST_END | K_R_UNREADABLE | K_R_WALK_ERROR | K_R_FETCHING => Some(MAX_CONTROL_BODY),
            K_R_LIST_DATA => Some(MAX_LIST_CHUNK),
            K_R_BLOCK => Some(BLOCK_PREFIX_LEN + MAX_BLOCK_SIZE as usize),
            K_R_SEALED_BLOCK => Some(SEALED_PREFIX_LEN + MAX_BLOCK_SIZE as usize),
            K_R_MANIFEST => Some(8 + HASH_LEN * MAX_MANIFEST_HASHES as usize),
            K_R_WEAK_SUMS => Some(8 + 4 * MAX_MANIFEST_HASHES as usize),
            _ => None,
        })?
        else {
            return Ok(None);
        };
        if src.len() < HEADER_LEN + len {
            src.reserve(HEADER_LEN + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let body = src.split_to(len).freeze();
        let mut r = Reader { buf: body, kind };
        let reply = match kind {
            K_R_HELLO => {
                if r.bytes(MAGIC.len())?.as_ref() != MAGIC {
                    return Err(ProtoError::BadMagic);
                }
                Reply::Hello { version: r.u16()?, server_id: r.array()?, max_block_size: r.u32()? }
            }
            K_R_STAT => Reply::Stat {
                size: r.u64()?,
                mtime_secs: r.i64()?,
                mtime_nanos: r.u32()?,
                digest: FileDigest { chunk_size: r.u32()?, sha256: r.array()?, manifest: r.array()? },
            },
            K_R_MANIFEST => {
                let first = r.u64()?;
                let partial = r.buf.len() % HASH_LEN;
                if partial != 0 {
                    return Err(ProtoError::Malformed { kind, why: "manifest body is not whole hashes" });
                }
                let hashes = r.buf.chunks_exact(HASH_LEN).map(|c| c.try_into().expect("HASH_LEN bytes")).collect();
                r.buf.clear();
                Reply::Manifest { first, hashes }
            }
            K_R_WEAK_SUMS => {
                let first = r.u64()?;
                if !r.buf.len().is_multiple_of(4) {
                    return Err(ProtoError::Malformed { kind, why: "weak sums body is not whole sums" });
                }
                let sums = r.buf.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes"))).collect();
                r.buf.clear();
                Reply::WeakSums { first, sums }
            }
            K_R_BLOCK => {
                let stream = r.u32()?;
                let block = r.u64()?;
                let payload = std::mem::take(&mut r.buf);
                Reply::Block { stream, block, payload }
            }
            K_R_SEALED_BLOCK => {
                let (stream, block, hash) = (r.u32()?, r.u64()?, r.array()?);
                Reply::SealedBlock { stream, block, hash, payload: std::mem::take(&mut r.buf) }
            }
            K_R_STOPPED => Reply::Stopped { stream: r.u32()?, sent: r.u64()? },
            K_R_WAITING => Reply::Waiting { stream: r.u32()? },
            K_R_FETCHING => {
                let (at, len) = (r.u64()?, r.u64()?);
                let dir = match r.u8()? {
                    0 => Direction::Increment,
                    1 => Direction::Decrement,
                    _ => return Err(ProtoError::Malformed { kind, why: "direction must be 0 or 1" }),
                };
                if at.checked_add(len).is_none() {
                    return Err(ProtoError::Malformed { kind, why: "range past the largest offset" });
                }
                Reply::Fetching { at, len, dir }
            }
            K_R_ERROR => {
                let code = ErrorCode::from_u16(r.u16()?);
                Reply::Error { code, message: r.string()? }
            }
            K_R_CHALLENGE => Reply::Challenge { nonce: r.array()? },
            K_R_BUNDLE => {
                let size = r.u64()?;
                Reply::Bundle { size, name: r.string()? }
            }
            K_R_LIST_DATA => {
                let n = r.buf.len();
                Reply::ListData { data: r.bytes(n)? }
            }
            K_R_LIST_END => Reply::ListEnd { errors: r.u64()? },
            K_R_UNREADABLE => Reply::Unreadable { index: r.u64()?, message: r.string()? },
            K_R_WALK_ERROR => Reply::WalkError { path: r.string()?, message: r.string()? },
            _ => unreachable!("kinds were filtered by peek_header"),
        };
        r.finish()?;
        Ok(Some(reply))
    }
}

/// Reads a header if one is there, checking the kind and its length cap
/// before anything of the body is buffered.
fn peek_header(src: &BytesMut, cap: impl Fn(u8) -> Option<usize>) -> Result<Option<(u8, usize)>, ProtoError> {
    if src.is_empty() {
        return Ok(None);
    }
    let kind = src[0];
    let max = cap(kind).ok_or(ProtoError::UnknownKind(kind))?;
    if src.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_be_bytes([src[1], src[2], src[3], src[4]]) as usize;
    if len > max {
        return Err(ProtoError::TooLong { kind, len, max });
    }
    Ok(Some((kind, len)))
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Bounds-checked reads from one frame body.
struct Reader {
    buf: Bytes,
    kind: u8,
}

impl Reader {
    fn need(&self, n: usize) -> Result<(), ProtoError> {
        if self.buf.remaining() < n {
            return Err(ProtoError::Malformed { kind: self.kind, why: "body too short" });
        }
        Ok(())
    }
    fn u8(&mut self) -> Result<u8, ProtoError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }
    fn u16(&mut self) -> Result<u16, ProtoError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }
    fn u32(&mut self) -> Result<u32, ProtoError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }
    fn u64(&mut self) -> Result<u64, ProtoError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }
    fn i64(&mut self) -> Result<i64, ProtoError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let b = self.bytes(N)?;
        Ok(b.as_ref().try_into().expect("exactly N bytes"))
    }
    fn bytes(&mut self, n: usize) -> Result<Bytes, ProtoError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }
    fn string(&mut self) -> Result<String, ProtoError> {
        let n = self.u16()? as usize;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed { kind: self.kind, why: "string is not UTF-8" })
    }
    fn path(&mut self) -> Result<String, ProtoError> {
        let s = self.string()?;
        if s.len() > MAX_PATH_LEN {
            return Err(ProtoError::Malformed { kind: self.kind, why: "path too long" });
        }
        Ok(s)
    }
    fn finish(self) -> Result<(), ProtoError> {
        if self.buf.has_remaining() {
            return Err(ProtoError::Malformed { kind: self.kind, why: "trailing bytes" });
        }
        Ok(())
    }
}

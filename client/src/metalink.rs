//! Metalink 4 (RFC 5854, `.meta4`): a file's mirrors, size, whole-file
//! hash and piece hashes, read with quick-xml (a streaming reader: no DOM,
//! no entity expansion beyond XML's five).
//!
//! Every element RFC 5854 defines is read or knowingly left: those that
//! say what the bytes are or where they come from and are not used here
//! (`metaurl`, `signature`, other hashes, `origin`, `os`, `language`, other
//! URL schemes) are told in [`MetalinkFile::unused`], for a warning; those
//! that only describe (`description`, `publisher`...) are left quietly; an
//! element the RFC does not define is told too.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::checksum::is_sha256_hex;
use crate::manifest::{ChunkHash, Manifest};

/// One `<file>` of a Metalink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalinkFile {
    pub name: String,
    pub size: Option<u64>,
    /// The whole file's SHA-256 (lowercase hex).
    pub sha256: Option<String>,
    /// Piece hashes, checked like a chunk manifest.
    pub pieces: Option<Manifest>,
    /// `http(s)` and `ddftp(s)` URLs, most preferred first (by `priority`).
    pub urls: Vec<String>,
    /// What is in it that ddftp does not use (other URL schemes, piece
    /// hashes of a kind it does not check, `metaurl`, a signature...),
    /// each once, for a warning.
    pub unused: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MetalinkError {
    #[error("not well-formed XML: {0}")]
    Xml(#[from] quick_xml::Error),
    #[error("bad attribute: {0}")]
    Attr(#[from] quick_xml::events::attributes::AttrError),
    #[error("not a Metalink 4 document (RFC 5854, .meta4): the root is <{0}>")]
    NotMetalink(String),
    #[error("<file name={0:?}>: {1}")]
    Bad(String, String),
    #[error("it lists no file")]
    NoFile,
}

#[derive(Default)]
struct Building {
    file: Option<MetalinkFile>,
    urls: Vec<(u32, String)>,
    piece_len: Option<u64>,
    piece_kind: Option<ChunkHash>,
    piece_hashes: Vec<[u8; 32]>,
    /// Each `<pieces>` of a checked kind (a file may have one of each
    /// kind, as aria2's own test files do): length, kind, hashes.
    piece_sets: Vec<(u64, ChunkHash, Vec<[u8; 32]>)>,
    in_pieces: bool,
    hash_type: Option<String>,
    url_priority: u32,
    /// Told of the document (outside any `<file>`), for every file.
    document: Vec<String>,
}

/// What is done with an element RFC 5854 defines (or not).
#[derive(Debug, PartialEq, Eq)]
enum Element {
    /// Read (`metalink`, `file`, `size`, `hash`, `pieces`, `url`).
    Read,
    /// Describes the file or document only; left quietly.
    Described,
    /// Says something about the bytes that is not used: told.
    Unused(&'static str),
    /// Not in RFC 5854.
    Unknown,
}

fn element(name: &str) -> Element {
    match name {
        "metalink" | "file" | "size" | "hash" | "pieces" | "url" => Element::Read,
        "copyright" | "description" | "generator" | "identity" | "logo" | "publisher" | "published" | "updated"
        | "version" => Element::Described,
        "metaurl" => Element::Unused("<metaurl> (a BitTorrent or other metadata URL) is not used"),
        "signature" => Element::Unused("<signature> is not checked (check it with gpg yourself)"),
        "origin" | "dynamic" => Element::Unused("<origin>/<dynamic> (where a newer Metalink is) is not fetched"),
        "os" => Element::Unused("<os> is not compared with this system"),
        "language" => Element::Unused("<language> is not used to choose among files"),
        _ => Element::Unknown,
    }
}

/// An element's fate: told, once, for the file being built or for the
/// document.
fn judge(b: &mut Building, name: &str) {
    let what = match element(name) {
        Element::Read | Element::Described => return,
        Element::Unused(why) => why.to_string(),
        Element::Unknown => format!("<{name}> is not a Metalink 4 element (RFC 5854): ignored"),
    };
    match b.file.as_mut() {
        Some(f) => push_once(&mut f.unused, what),
        None => push_once(&mut b.document, what),
    }
}

fn push_once(to: &mut Vec<String>, what: String) {
    if !to.contains(&what) {
        to.push(what);
    }
}

/// The files a Metalink 4 document lists.
pub fn parse(xml: &str) -> Result<Vec<MetalinkFile>, MetalinkError> {
    let mut r = Reader::from_str(xml);
    r.config_mut().trim_text(true);
    let mut files = vec![];
    let mut b = Building::default();
    let mut path: Vec<String> = vec![];
    loop {
        match r.read_event()? {
            Event::Start(e) => {
                let name = local(&e);
                if path.is_empty() && name != "metalink" {
                    return Err(MetalinkError::NotMetalink(name));
                }
                judge(&mut b, &name);
                start(&mut b, &name, &e)?;
                path.push(name);
            }
            Event::Empty(e) => {
                let name = local(&e);
                if path.is_empty() {
                    return Err(MetalinkError::NotMetalink(name));
                }
                judge(&mut b, &name);
            }
            Event::Text(t) => {
                let text = t.unescape()?.trim().to_string();
                let Some(file) = b.file.as_mut() else { continue };
                let bad = |why: String| MetalinkError::Bad(file.name.clone(), why);

                match path.last().map(String::as_str) {
                    Some("size") => file.size = Some(text.parse().map_err(|_| bad(format!("size {text:?}")))?),
                    // Pieces of a kind not checked (md5): told in `unused`, skipped.
                    Some("hash") if b.in_pieces && b.piece_kind.is_none() => {}
                    Some("hash") if b.in_pieces => b
                        .piece_hashes
                        .push(piece_hash(&text, b.piece_kind).ok_or_else(|| bad(format!("piece hash {text:?}")))?),
                    Some("hash") if b.hash_type.as_deref() == Some("sha-256") => {
                        if !is_sha256_hex(&text) {
                            return Err(bad(format!("sha-256 {text:?} is not 64 hex digits")));
                        }
                        file.sha256 = Some(text.to_ascii_lowercase());
                    }
                    Some("url")
                        if ["http://", "https://", "ddftp://", "ddftps://"].iter().any(|p| text.starts_with(p)) =>
                    {
                        b.urls.push((b.url_priority, text))
                    }
                    Some("url") => {
                        push_once(&mut file.unused, format!("URL {text} (only http(s) and ddftp(s) are used)"))
                    }
                    Some("hash") if !b.in_pieces => {
                        let kind = b.hash_type.as_deref().unwrap_or_default();
                        let what = format!("a whole-file hash of type {kind:?} is not checked (sha-256 is)");
                        push_once(&mut file.unused, what);
                    }
                    _ => {}
                }
            }
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                match name.as_str() {
                    "pieces" => {
                        b.in_pieces = false;
                        if let (Some(len), Some(kind)) = (b.piece_len, b.piece_kind) {
                            b.piece_sets.push((len, kind, std::mem::take(&mut b.piece_hashes)));
                        }
                    }
                    "file" => files.push(finish(&mut b)?),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if files.is_empty() {
        return Err(MetalinkError::NoFile);
    }
    // What the document says after its last file, for every file too.
    for f in &mut files {
        for d in &b.document {
            push_once(&mut f.unused, d.clone());
        }
    }
    Ok(files)
}

fn local(e: &BytesStart) -> String {
    String::from_utf8_lossy(e.local_name().as_ref()).into_owned()
}

fn attr(e: &BytesStart, key: &str) -> Result<Option<String>, MetalinkError> {
    for a in e.attributes() {
        let a = a?;
        if a.key.local_name().as_ref() == key.as_bytes() {
            return Ok(Some(a.unescape_value()?.into_owned()));
        }
    }
    Ok(None)
}

fn start(b: &mut Building, name: &str, e: &BytesStart) -> Result<(), MetalinkError> {
    match name {
        "file" => {
            let name = attr(e, "name")?.unwrap_or_default();
            let document = std::mem::take(&mut b.document);
            *b = Building { document, ..Building::default() };
            b.file = Some(MetalinkFile { name, size: None, sha256: None, pieces: None, urls: vec![], unused: vec![] });
        }
        "hash" => b.hash_type = attr(e, "type")?.map(|t| t.to_ascii_lowercase()),
        "url" => b.url_priority = attr(e, "priority")?.and_then(|p| p.parse().ok()).unwrap_or(u32::MAX),
        "pieces" => {
            let bad = |why: String| MetalinkError::Bad(b.file.as_ref().map_or(String::new(), |f| f.name.clone()), why);
            let len = attr(e, "length")?.unwrap_or_default();
            b.piece_len = Some(
                len.parse()
                    .ok()
                    .filter(|&l: &u64| l > 0 && l <= 1 << 30)
                    .ok_or_else(|| bad(format!("piece length {len:?}")))?,
            );
            b.in_pieces = true;
            b.piece_kind = match attr(e, "type")?.map(|t| t.to_ascii_lowercase()).as_deref() {
                Some("sha-256") => Some(ChunkHash::Sha256),
                Some("sha-1") => Some(ChunkHash::Sha1),
                other => {
                    if let Some(f) = b.file.as_mut() {
                        push_once(
                            &mut f.unused,
                            format!("piece hashes of type {other:?} (sha-256 and sha-1 are checked)"),
                        );
                    }
                    None
                }
            };
        }
        _ => {}
    }
    Ok(())
}

/// A piece hash of `kind` in hex, padded to 32 bytes (a SHA-1 has 20).
fn piece_hash(hex: &str, kind: Option<ChunkHash>) -> Option<[u8; 32]> {
    let len = match kind? {
        ChunkHash::Sha256 => 32,
        ChunkHash::Sha1 => 20,
        ChunkHash::Blake3 => return None,
    };
    if hex.len() != 2 * len {
        return None;
    }
    let mut h = [0u8; 32];
    for (i, out) in h.iter_mut().take(len).enumerate() {
        *out = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(h)
}

fn finish(b: &mut Building) -> Result<MetalinkFile, MetalinkError> {
    let mut file = b.file.take().ok_or(MetalinkError::NoFile)?;
    for d in &b.document {
        push_once(&mut file.unused, d.clone());
    }
    let bad = |why: String| MetalinkError::Bad(file.name.clone(), why);
    if let Err(e) = ddftp_proto::relpath::check(file.name.as_bytes()) {
        return Err(bad(format!("a file name must be a plain relative path: {e}")));
    }
    b.urls.sort_by_key(|(p, _)| *p);
    file.urls = b.urls.drain(..).map(|(_, u)| u).collect();
    // SHA-256 pieces where there are, else SHA-1; the others told.
    let mut sets = std::mem::take(&mut b.piece_sets);
    sets.sort_by_key(|(_, kind, _)| u8::from(*kind != ChunkHash::Sha256));
    let mut sets = sets.into_iter();
    let chosen = sets.next();
    for (_, kind, _) in sets {
        let kind = if kind == ChunkHash::Sha1 { "sha-1" } else { "sha-256" };
        push_once(&mut file.unused, format!("another set of piece hashes ({kind}) is not checked (a sha-256 set is)"));
    }
    if let Some((len, kind, hashes)) = chosen {
        b.piece_hashes = hashes;
        let size = file.size.ok_or_else(|| bad("piece hashes without a <size>".into()))?;
        let want = size.div_ceil(len);
        if b.piece_hashes.len() as u64 != want {
            return Err(bad(format!(
                "{} piece hashes, a {size}-byte file in pieces of {len} has {want}",
                b.piece_hashes.len()
            )));
        }
        let chunk_size = u32::try_from(len).map_err(|_| bad(format!("piece length {len}")))?;
        file.pieces = Some(Manifest { chunk_size, hashes: std::mem::take(&mut b.piece_hashes), kind });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta4_gives_urls_by_priority_size_hash_and_pieces() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <file name="example.ext">
    <size>5</size>
    <hash type="sha-256">2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824</hash>
    <pieces length="4" type="sha-256">
      <hash>88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589</hash>
      <hash>3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea</hash>
    </pieces>
    <url priority="2">http://b.example/example.ext</url>
    <url priority="1">https://a.example/example.ext</url>
    <url>ftp://c.example/example.ext</url>
    <metaurl mediatype="torrent">http://example.com/example.ext.torrent</metaurl>
  </file>
</metalink>"#;
        let f = &parse(xml).unwrap()[0];
        assert_eq!(f.name, "example.ext");
        assert_eq!(f.size, Some(5));
        assert_eq!(f.sha256.as_deref(), Some("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"));
        assert_eq!(f.urls, ["https://a.example/example.ext", "http://b.example/example.ext"]);
        assert_eq!(f.unused.len(), 2, "the ftp URL and the metaurl: {:?}", f.unused);
        let p = f.pieces.as_ref().unwrap();
        assert!(p.verify(0, b"abcd") && p.verify(4, b"e") && !p.verify(0, b"abce"));
    }

    #[test]
    fn wrong_documents_are_refused_with_why() {
        assert!(matches!(parse("<html></html>"), Err(MetalinkError::NotMetalink(_))));
        assert!(parse("<metalink><file name=\"../x\"><size>1</size></file></metalink>").is_err());
        let short = r#"<metalink><file name="x"><size>9</size><pieces length="4" type="sha-256">
            <hash>88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589</hash></pieces></file></metalink>"#;
        assert!(parse(short).unwrap_err().to_string().contains("1 piece hashes"));
        assert!(matches!(parse("<metalink></metalink>"), Err(MetalinkError::NoFile)));
    }

    #[test]
    fn piece_hashes_of_a_kind_not_checked_are_skipped_and_told() {
        let md5 = r#"<metalink><file name="x"><size>9</size><pieces length="4" type="md5">
            <hash>0cc175b9c0f1b6a831c399e269772661</hash><hash>0cc175b9c0f1b6a831c399e269772661</hash>
            <hash>0cc175b9c0f1b6a831c399e269772661</hash></pieces>
            <url>http://a.example/x</url></file></metalink>"#;
        let f = &parse(md5).unwrap()[0];
        assert!(f.pieces.is_none());
        assert!(f.unused.iter().any(|u| u.contains("md5")), "{:?}", f.unused);
    }

    #[test]
    fn every_rfc_5854_element_is_read_described_or_told() {
        let xml = r#"<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <generator>x/1</generator><origin dynamic="true">http://a.example/x.meta4</origin>
  <published>2026-01-01T00:00:00Z</published>
  <file name="a"><size>1</size><description>d</description><copyright>c</copyright>
    <identity>i</identity><version>1</version><logo>l</logo><publisher name="p"/>
    <hash type="md5">0cc175b9c0f1b6a831c399e269772661</hash>
    <signature mediatype="application/pgp-signature">sig</signature>
    <os>linux</os><language>en</language><frobnicate/>
    <url>http://a.example/a</url></file>
  <file name="b"><size>1</size><url>http://a.example/b</url></file>
  <updated>2026-01-02T00:00:00Z</updated><extra-thing/>
</metalink>"#;
        let files = parse(xml).unwrap();
        let told = |f: &MetalinkFile, what: &str| f.unused.iter().any(|u| u.contains(what));
        for what in ["md5", "<signature>", "<origin>", "<os>", "<language>", "<frobnicate>", "<extra-thing>"] {
            assert!(told(&files[0], what), "{what}: {:?}", files[0].unused);
        }
        assert!(told(&files[1], "<origin>") && told(&files[1], "<extra-thing>"), "{:?}", files[1].unused);
        assert!(!told(&files[1], "<os>"), "another file's: {:?}", files[1].unused);
        for quiet in ["description", "copyright", "identity", "version", "logo", "publisher", "generator", "updated"] {
            assert!(!files.iter().any(|f| told(f, quiet)), "{quiet}");
        }
    }
}

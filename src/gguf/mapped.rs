//! A GGUF file mapped read-only and parsed in place (feature `model`).

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::error::GgufError;
use super::parse::Gguf;

/// A GGUF file mapped into memory and parsed in place: the tables are built once, and every
/// string and tensor's data is borrowed from the mapping, so opening a model copies none of
/// its weights (the pages are read when a kernel first touches them).
///
/// ```no_run
/// use skainet_schedule::gguf::GgufFile;
///
/// let file = GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
/// let gguf = file.gguf();
/// println!("{} layers", gguf.get_u32("llama.block_count")?);
/// let embeddings = gguf.tensor("token_embd.weight")?;
/// println!("{:?} {:?}, {} bytes", embeddings.ty(), embeddings.dims(), embeddings.data().len());
/// # Ok::<(), skainet_schedule::gguf::GgufError>(())
/// ```
///
/// The file must not change while it is open: see [`GgufFile::open`].
pub struct GgufFile {
    // Declared before `map`, so it is dropped first: it borrows from the mapping.
    gguf: Gguf<'static>,
    /// `None` for an empty file, which cannot be mapped (and is refused by the parse).
    map: Option<Mmap>,
    path: PathBuf,
}

impl GgufFile {
    /// Maps the file at `path` read-only and parses it ([`Gguf::parse`]).
    ///
    /// A file that cannot be opened or mapped is [`GgufError::Io`], naming the path; a file
    /// that is not valid GGUF is the parse's error.
    ///
    /// The mapping shows the file as it is on disk, not a copy: if another process writes to
    /// the file while it is open, the bytes (and tensor data) read through this value change
    /// under it, and if the file is truncated, reading the lost pages kills the process with
    /// `SIGBUS`. This is the contract of every memory-mapped reader (`memmap2::Mmap::map`
    /// documents it); do not modify a model file while a program reads it.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: `Mmap::map` is unsafe because the mapping aliases the file: another
            // process that writes to or truncates the file while it is mapped changes bytes we
            // hand out as `&[u8]`, or makes them unreadable (memmap2 documents this). No safe
            // API can prevent it, so, like every mmap-based model loader, we map read-only and
            // document in `open` that the file must not change while it is open. Nothing in
            // this process writes through the mapping.
            Some(unsafe { Mmap::map(&file) }.map_err(io)?)
        };
        let bytes: &[u8] = match &map {
            Some(map) => map,
            None => &[],
        };
        // SAFETY: the slice points into the mapping, whose address does not change when the
        // `Mmap` value moves and which stays mapped until `map` is dropped. The `'static` is
        // never seen outside: `gguf()` hands the parse out as `Gguf<'s>` for a borrow `'s` of
        // `self` (`Gguf` is covariant in its lifetime), and `gguf` is dropped before `map`.
        let bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) };
        let gguf = Gguf::parse(bytes)?;
        Ok(GgufFile {
            gguf,
            map,
            path: path.to_path_buf(),
        })
    }

    /// The parsed file; everything it hands out borrows from `self`.
    pub fn gguf(&self) -> &Gguf<'_> {
        &self.gguf
    }

    /// The whole file's bytes, as mapped.
    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => map,
            None => &[],
        }
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("len", &self.bytes().len())
            .field("gguf", &self.gguf)
            .finish()
    }
}

//! A GGUF file mapped read-only and parsed in place (feature `model`).

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapOptions};

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
    /// Where in `map` the file's bytes start, and how many there are.
    start: usize,
    len: usize,
    path: PathBuf,
}

/// The huge page size [`GgufFile::load_in_huge_pages`] aligns the file's bytes to.
const HUGE_PAGE: usize = 2 << 20;

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
        let len = map.as_ref().map_or(0, |m| m.len());
        Self::parsed(map, 0, len, path)
    }

    /// Reads the file at `path` into anonymous memory that the OS is asked to back with
    /// transparent huge pages (on Linux, `madvise(MADV_HUGEPAGE)` before the first write, the
    /// bytes starting on a 2 MiB boundary), then parses it as [`open`](Self::open) does.
    ///
    /// This copies the file's bytes once (never an f32 copy of a weight), where `open` maps the
    /// page cache: a decode step streams every weight, and from 2 MiB pages the stream crosses
    /// a page every 2 MiB instead of every 4 KiB (llama.cpp's `--no-mmap` reads the file into
    /// memory too). Elsewhere the memory is allocated as usual. Errors as [`open`](Self::open).
    pub fn load_in_huge_pages(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        use std::io::Read;
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let too_large = || io(std::io::Error::other("the file does not fit in memory"));
        let len = usize::try_from(len).map_err(|_| too_large())?;
        if len == 0 {
            return Self::parsed(None, 0, 0, path);
        }
        let room = len.checked_add(HUGE_PAGE).ok_or_else(too_large)?;
        let mut anon = MmapOptions::new().len(room).map_anon().map_err(io)?;
        let start = anon.as_ptr().align_offset(HUGE_PAGE).min(HUGE_PAGE);
        // Advice, not a demand: where the kernel declines, the pages are small ones.
        #[cfg(target_os = "linux")]
        let _ = anon.advise(memmap2::Advice::HugePage);
        file.read_exact(&mut anon[start..start + len]).map_err(io)?;
        let map = anon.make_read_only().map_err(io)?;
        Self::parsed(Some(map), start, len, path)
    }

    /// Parses `len` bytes of `map` from `start` (the whole of an empty file when `map` is
    /// `None`).
    fn parsed(
        map: Option<Mmap>,
        start: usize,
        len: usize,
        path: &Path,
    ) -> Result<GgufFile, GgufError> {
        let bytes: &[u8] = match &map {
            Some(map) => &map[start..start + len],
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
            start,
            len,
            path: path.to_path_buf(),
        })
    }

    /// The parsed file; everything it hands out borrows from `self`.
    pub fn gguf(&self) -> &Gguf<'_> {
        &self.gguf
    }

    /// The whole file's bytes, as mapped (or read, for
    /// [`load_in_huge_pages`](Self::load_in_huge_pages)).
    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => &map[self.start..self.start + self.len],
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

//! Driving IREE's command-line tools on an exported module (feature `std`): find
//! `iree-compile` and `iree-run-module`, compile a module for the local CPU, run it with a
//! given number of task groups, and exchange tensors as `.npy` files.
//!
//! The tools come from PyPI (`pip install iree-base-compiler iree-base-runtime`). They are
//! looked for in `$IREE_BIN_DIR`, then in `<repo>/.venv/bin`, then on `PATH`.
//!
//! The compiled `.vmfb` states no core count: the number of cores is a property of the
//! device, chosen when `iree-run-module` creates it (`--task_topology_group_count`). One knob
//! sets it on both sides: [`task_groups`] reads `SKAINET_TASK_GROUPS` as the eager `hardware()`
//! pool does, and [`IreeTools::run_files_env`] passes that number to the device.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::string::String;
use std::vec::Vec;

use super::npy;
use crate::tensor::Tensor;

/// The flags `iree-compile` gets: the local device, the `llvm-cpu` backend, and a generic
/// CPU so that one `.vmfb` runs on any machine of the architecture.
pub const COMPILE_FLAGS: [&str; 3] = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",
];

/// What went wrong around the IREE tools.
#[derive(Debug)]
#[non_exhaustive]
pub enum IreeError {
    /// A tool is in none of the places searched.
    NotFound {
        /// The tool's name.
        tool: &'static str,
        /// The places looked in, in order.
        searched: Vec<PathBuf>,
    },
    /// Reading or writing a file, or starting a process, failed.
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// A tool ran and failed.
    Failed {
        /// The command line.
        command: String,
        /// Its exit code (`None` when killed by a signal).
        code: Option<i32>,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// `SKAINET_TASK_GROUPS` is set but is not a positive integer no larger than
    /// [`MAX_TASK_GROUPS`].
    TaskGroups {
        /// The variable's value, as found (lossily decoded when it was not UTF-8).
        value: String,
    },
    /// An output file was not a `.npy` this crate reads, or an input has no `.npy` form.
    Npy {
        /// The file.
        path: PathBuf,
        /// Why.
        error: npy::NpyError,
    },
}

impl fmt::Display for IreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { tool, searched } => {
                write!(
                    f,
                    "{tool} not found; looked in {searched:?}. Install it with \
                     `python3 -m venv .venv && .venv/bin/pip install iree-base-compiler iree-base-runtime` \
                     at the repository root, or point IREE_BIN_DIR at the directory holding it"
                )
            }
            Self::Io { what, error } => write!(f, "{what}: {error}"),
            Self::Failed {
                command,
                code,
                stderr,
            } => write!(f, "`{command}` failed with {code:?}:\n{stderr}"),
            Self::TaskGroups { value } => write!(
                f,
                "{TASK_GROUPS_VAR} must be a positive integer no larger than {MAX_TASK_GROUPS}, got {value:?}"
            ),
            Self::Npy { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for IreeError {}

/// The environment variable whose value is both the eager `hardware()` pool's parallelism and
/// the IREE device's `--task_topology_group_count` (the `parallel` feature's
/// `TASK_GROUPS_VAR`, named here too so that the runner needs no thread pool).
pub const TASK_GROUPS_VAR: &str = "SKAINET_TASK_GROUPS";

/// The most task groups [`task_groups`] accepts: the `parallel` feature's `MAX_PARALLELISM`,
/// the largest pool `hardware()` builds, so the knob means one number on both sides.
pub const MAX_TASK_GROUPS: usize = 1024;

/// The task groups an IREE device gets from the knob: `SKAINET_TASK_GROUPS` when it is set,
/// read as `hardware()` reads it (a positive decimal integer, surrounding whitespace allowed,
/// at most [`MAX_TASK_GROUPS`]); else the machine's available parallelism (capped at
/// [`MAX_TASK_GROUPS`]), which is also what `hardware()` uses then.
///
/// ```no_run
/// # fn main() -> Result<(), skainet_schedule::graph::iree::IreeError> {
/// // SKAINET_TASK_GROUPS=2: the eager pool has 2 tasks, the device 2 task groups.
/// let groups = skainet_schedule::graph::iree::task_groups()?;
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`IreeError::TaskGroups`] when the variable is set to anything else: unlike `hardware()`,
/// which falls back and reports once, a check that was asked for a core count does not run
/// with another one.
pub fn task_groups() -> Result<usize, IreeError> {
    match std::env::var_os(TASK_GROUPS_VAR) {
        Some(value) => {
            let value = value.to_string_lossy();
            parse_task_groups(&value).ok_or_else(|| IreeError::TaskGroups {
                value: value.into_owned(),
            })
        }
        None => Ok(std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(MAX_TASK_GROUPS)),
    }
}

/// A `SKAINET_TASK_GROUPS` value as a count, or `None` when it is not one.
fn parse_task_groups(value: &str) -> Option<usize> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| (1..=MAX_TASK_GROUPS).contains(&n))
}

/// Where the two tools are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IreeTools {
    /// `iree-compile`.
    pub compile: PathBuf,
    /// `iree-run-module`.
    pub run: PathBuf,
}

impl IreeTools {
    /// Finds the tools in `$IREE_BIN_DIR`, then `<repo_root>/.venv/bin`, then on `PATH`.
    ///
    /// # Errors
    ///
    /// [`IreeError::NotFound`] with every place searched.
    pub fn locate(repo_root: &Path) -> Result<Self, IreeError> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(dir) = std::env::var_os("IREE_BIN_DIR") {
            dirs.push(PathBuf::from(dir));
        }
        dirs.push(repo_root.join(".venv").join("bin"));
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        let find = |tool: &'static str| {
            let file = format!("{tool}{}", std::env::consts::EXE_SUFFIX);
            dirs.iter()
                .map(|d| d.join(&file))
                .find(|p| p.is_file())
                .ok_or_else(|| IreeError::NotFound {
                    tool,
                    searched: dirs.clone(),
                })
        };
        Ok(Self {
            compile: find("iree-compile")?,
            run: find("iree-run-module")?,
        })
    }

    /// Compiles the MLIR file `mlir` to `vmfb` with [`COMPILE_FLAGS`].
    ///
    /// # Errors
    ///
    /// [`IreeError::Io`] when the tool cannot start, [`IreeError::Failed`] when it fails.
    pub fn compile(&self, mlir: &Path, vmfb: &Path) -> Result<(), IreeError> {
        let mut args: Vec<OsString> = COMPILE_FLAGS.iter().map(OsString::from).collect();
        args.push(mlir.into());
        args.push("-o".into());
        args.push(vmfb.into());
        run_tool(&self.compile, &args)
    }

    /// Runs `@main` of `vmfb` on the local-task device with `groups` task groups, reading the
    /// inputs from and writing the outputs to `.npy` files.
    ///
    /// # Errors
    ///
    /// [`IreeError::Io`] when the tool cannot start, [`IreeError::Failed`] when it fails.
    pub fn run_files(
        &self,
        vmfb: &Path,
        groups: usize,
        inputs: &[PathBuf],
        outputs: &[PathBuf],
    ) -> Result<(), IreeError> {
        let mut args: Vec<OsString> = vec![
            "--device=local-task".into(),
            format!("--task_topology_group_count={groups}").into(),
            prefixed("--module=", vmfb),
            format!("--function={}", super::stablehlo::FUNCTION).into(),
        ];
        args.extend(inputs.iter().map(|p| prefixed("--input=@", p)));
        args.extend(outputs.iter().map(|p| prefixed("--output=@", p)));
        run_tool(&self.run, &args)
    }

    /// [`run_files`](Self::run_files) with the knob's group count, [`task_groups`]: the number
    /// `SKAINET_TASK_GROUPS` also gives the eager `hardware()` pool. Returns the count it ran
    /// with.
    ///
    /// # Errors
    ///
    /// [`IreeError::TaskGroups`] for an invalid `SKAINET_TASK_GROUPS`; as
    /// [`run_files`](Self::run_files).
    pub fn run_files_env(
        &self,
        vmfb: &Path,
        inputs: &[PathBuf],
        outputs: &[PathBuf],
    ) -> Result<usize, IreeError> {
        let groups = task_groups()?;
        self.run_files(vmfb, groups, inputs, outputs)?;
        Ok(groups)
    }

    /// [`run_files`](Self::run_files) with tensors: writes `inputs` as `in<i>.npy` into `dir`,
    /// runs, and reads `outputs` results back from `out<i>.npy`.
    ///
    /// # Errors
    ///
    /// As [`run_files`](Self::run_files), plus [`IreeError::Io`] / [`IreeError::Npy`] for the
    /// files.
    pub fn run(
        &self,
        vmfb: &Path,
        groups: usize,
        dir: &Path,
        inputs: &[&Tensor],
        outputs: usize,
    ) -> Result<Vec<Tensor>, IreeError> {
        let mut input_paths = Vec::with_capacity(inputs.len());
        for (i, t) in inputs.iter().enumerate() {
            let path = dir.join(format!("in{i}.npy"));
            write_npy(&path, t)?;
            input_paths.push(path);
        }
        let output_paths: Vec<PathBuf> = (0..outputs)
            .map(|i| dir.join(format!("out{i}.npy")))
            .collect();
        self.run_files(vmfb, groups, &input_paths, &output_paths)?;
        output_paths.iter().map(|p| read_npy(p)).collect()
    }
}

/// Writes `tensor` to `path` as `.npy`.
///
/// # Errors
///
/// [`IreeError::Npy`] when the tensor has no `.npy` form (a header over 4 GiB);
/// [`IreeError::Io`].
pub fn write_npy(path: &Path, tensor: &Tensor) -> Result<(), IreeError> {
    let bytes = npy::try_to_bytes(tensor).map_err(|error| IreeError::Npy {
        path: path.to_path_buf(),
        error,
    })?;
    std::fs::write(path, bytes).map_err(|error| IreeError::Io {
        what: format!("writing {}", path.display()),
        error,
    })
}

/// Reads the `.npy` file at `path`.
///
/// # Errors
///
/// [`IreeError::Io`] or [`IreeError::Npy`].
pub fn read_npy(path: &Path) -> Result<Tensor, IreeError> {
    let bytes = std::fs::read(path).map_err(|error| IreeError::Io {
        what: format!("reading {}", path.display()),
        error,
    })?;
    npy::from_bytes(&bytes).map_err(|error| IreeError::Npy {
        path: path.to_path_buf(),
        error,
    })
}

fn prefixed(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path);
    s
}

fn run_tool(tool: &Path, args: &[OsString]) -> Result<(), IreeError> {
    let command = || {
        let mut s = tool.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    };
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|error| IreeError::Io {
            what: format!("starting {}", command()),
            error,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(IreeError::Failed {
            command: command(),
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn the_knob_reads_positive_counts_up_to_the_pool_maximum() {
        assert_eq!(parse_task_groups("2"), Some(2));
        assert_eq!(parse_task_groups(" 4\n"), Some(4));
        assert_eq!(parse_task_groups("1024"), Some(1024));
        for bad in [
            "",
            "0",
            "-1",
            "1.5",
            "two",
            "1025",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_task_groups(bad), None, "{bad:?}");
        }
    }

    #[cfg(feature = "parallel")]
    #[test]
    fn the_knob_means_what_it_means_to_the_eager_pool() {
        assert_eq!(TASK_GROUPS_VAR, crate::TASK_GROUPS_VAR);
        assert_eq!(MAX_TASK_GROUPS, crate::MAX_PARALLELISM);
        for value in ["1", " 3 ", "0", "", "x", "1024", "1025", "-2"] {
            assert_eq!(
                parse_task_groups(value),
                crate::parse_task_groups(value).ok(),
                "{value:?}"
            );
        }
    }
}

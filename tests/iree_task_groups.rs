//! One knob for both sides: `SKAINET_TASK_GROUPS` is the IREE runner's
//! `--task_topology_group_count`, as it is the eager `hardware()` pool's parallelism. (Its own
//! test binary: it sets the variable.) Needs the IREE tools, as `tests/iree_roundtrip.rs` does.
#![cfg(all(feature = "std", not(feature = "loom")))]

use std::path::Path;

use skainet_schedule::graph::iree::{self, IreeError, IreeTools};
use skainet_schedule::graph::{stablehlo, GraphBuilder};
use skainet_schedule::Tensor;

#[test]
fn iree_runs_with_the_task_groups_of_the_environment() {
    let tools = IreeTools::locate(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| {
        panic!("{e}\n(to leave the IREE tests out on purpose: `cargo test -- --skip iree_`)")
    });
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    let y = b.mul(x, x).finish().unwrap();
    b.output(y).unwrap();
    let dir = std::env::temp_dir().join(format!("skainet-iree-knob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mlir, vmfb) = (dir.join("model.mlir"), dir.join("model.vmfb"));
    std::fs::write(&mlir, stablehlo::export(&b.build().unwrap())).unwrap();
    tools.compile(&mlir, &vmfb).unwrap();
    let input = dir.join("x.npy");
    let x = Tensor::new(vec![2, 3], vec![1.0, -2.0, 3.0, 0.5, 0.0, 4.0]).unwrap();
    iree::write_npy(&input, &x).unwrap();
    let output = dir.join("y.npy");

    // The only test in this process, so no other thread reads the environment meanwhile.
    std::env::set_var(iree::TASK_GROUPS_VAR, " 3 ");
    assert_eq!(iree::task_groups().unwrap(), 3);
    let groups = tools
        .run_files_env(
            &vmfb,
            std::slice::from_ref(&input),
            std::slice::from_ref(&output),
        )
        .unwrap();
    assert_eq!(groups, 3);
    let y = iree::read_npy(&output).unwrap();
    assert_eq!(y.data(), [1.0, 4.0, 9.0, 0.25, 0.0, 16.0]);

    // The count is what the device is created with: a failing run shows its command line.
    let missing = dir.join("missing.vmfb");
    match tools.run_files_env(&missing, std::slice::from_ref(&input), &[]) {
        Err(IreeError::Failed { command, .. }) => {
            assert!(
                command.contains(" --task_topology_group_count=3 "),
                "{command}"
            )
        }
        other => panic!("expected a failed run, got {other:?}"),
    }

    // A value the eager pool would refuse is refused here too, before anything runs.
    for bad in ["0", "two", "1025"] {
        std::env::set_var(iree::TASK_GROUPS_VAR, bad);
        match tools.run_files_env(&vmfb, std::slice::from_ref(&input), &[]) {
            Err(IreeError::TaskGroups { value }) => assert_eq!(value, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    std::env::remove_var(iree::TASK_GROUPS_VAR);
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        iree::task_groups().unwrap(),
        machine.min(iree::MAX_TASK_GROUPS)
    );
    std::fs::remove_dir_all(&dir).ok();
}

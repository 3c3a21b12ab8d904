//! The cluster files of docs/scale.md, checked for the fields quiclab relies on: no Kubernetes
//! cluster is available here, so the Indexed Job is validated as data (an Indexed Job whose index
//! becomes `--shard K/N` with N = completions, privileged pods with the host's /dev/net/tun, one
//! pod per node, results on a shared volume, and a merge Job after it); the Slurm array script is
//! checked for the array variables it reads and the command it runs. The image those files name is
//! built by deploy/image/build (debootstrap and podman, from Debian's packages) and a one-run grid
//! runs inside it.

use serde::Deserialize;
use serde_yaml::Value;

mod common;
use common::*;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

#[test]
fn the_kubernetes_indexed_job_runs_one_shard_per_pod_and_merges_after() {
    let text = std::fs::read_to_string(root().join("deploy/k8s/quiclab-indexed-job.yaml")).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(Value::deserialize)
        .collect::<Result<_, _>>()
        .expect("the manifest parses as YAML");
    assert_eq!(docs.len(), 2, "the shards Job and the merge Job");
    let (shards, merge) = (&docs[0], &docs[1]);
    for job in [shards, merge] {
        assert_eq!(s(&job["apiVersion"]), "batch/v1");
        assert_eq!(s(&job["kind"]), "Job");
        assert_eq!(
            s(&job["spec"]["template"]["spec"]["restartPolicy"]),
            "Never"
        );
    }
    let spec = &shards["spec"];
    assert_eq!(s(&spec["completionMode"]), "Indexed");
    let n = spec["completions"].as_u64().unwrap();
    assert!(n >= 1 && spec["parallelism"].as_u64().unwrap() <= n);
    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["privileged"].as_bool(), Some(true));
    // The index (0-based) becomes --shard K/N (1-based), N from the env that equals completions.
    let args = s(&c["args"][0]);
    assert!(args.contains("quiclab run"), "{args}");
    assert!(
        args.contains("--shard $((JOB_COMPLETION_INDEX + 1))/$(SHARDS)"),
        "{args}"
    );
    assert!(args.contains("--out /results/shard-$((JOB_COMPLETION_INDEX + 1))"));
    let env = c["env"].as_sequence().unwrap();
    let shards_env = env.iter().find(|e| s(&e["name"]) == "SHARDS").unwrap();
    assert_eq!(s(&shards_env["value"]).parse::<u64>().unwrap(), n);
    // /dev/net/tun from the host, results on a claim every pod shares.
    let volumes = pod["volumes"].as_sequence().unwrap();
    let tun = volumes.iter().find(|v| s(&v["name"]) == "tun").unwrap();
    assert_eq!(s(&tun["hostPath"]["path"]), "/dev/net/tun");
    assert_eq!(s(&tun["hostPath"]["type"]), "CharDevice");
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    assert!(mounts.iter().any(|m| s(&m["mountPath"]) == "/dev/net/tun"));
    assert!(mounts.iter().any(|m| s(&m["mountPath"]) == "/results"));
    let claim = |p: &Value| -> String {
        p["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| s(&v["name"]) == "results")
            .map(|v| s(&v["persistentVolumeClaim"]["claimName"]).to_string())
            .unwrap()
    };
    assert_eq!(claim(pod), claim(&merge["spec"]["template"]["spec"]));
    // One pod per node: runs must not share a machine.
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(s(&anti["topologyKey"]), "kubernetes.io/hostname");
    // The merge reads the shards and writes the merged directory.
    let margs = s(&merge["spec"]["template"]["spec"]["containers"][0]["args"][0]);
    assert!(
        margs.contains("quiclab merge") && margs.contains("--out /results/merged"),
        "{margs}"
    );
}

#[test]
fn the_slurm_array_maps_its_task_to_a_shard() {
    let text = std::fs::read_to_string(root().join("scripts/slurm/quiclab-array.sbatch")).unwrap();
    for needed in [
        "#SBATCH --exclusive",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "--shard \"$k/$n\"",
        "--out \"$results/shard-$k\"",
    ] {
        assert!(text.contains(needed), "quiclab-array.sbatch lacks {needed}");
    }
    let merge = std::fs::read_to_string(root().join("scripts/slurm/quiclab-merge.sbatch")).unwrap();
    assert!(merge.contains("merge \"$results\"/shard-* --out \"$results/merged\""));
}

/// The image the manifest names: built by its recipe from Debian's packages and this binary, then
/// a one-run grid inside it, as root, the lab's namespaces and TUN devices inside the container.
#[test]
fn the_image_builds_and_runs_a_one_run_grid_inside() {
    if !root_or_skip("the_image_builds_and_runs_a_one_run_grid_inside") {
        return;
    }
    let tag = format!("localhost/quiclab-test:{}", std::process::id());
    let build = std::process::Command::new(root().join("deploy/image/build"))
        .args(["--tag", &tag, "--binary", env!("CARGO_BIN_EXE_quiclab")])
        .output()
        .unwrap();
    assert_success(&build);
    let dir = temp_dir("image");
    write(
        &dir,
        "one.toml",
        "name = \"one\"\nrepetitions = 1\n[workload]\nkind = \"bulk\"\nsize = \"200kB\"\n\
         [protocol]\nprotocol = \"h3\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n",
    );
    // runc: crun refuses a host whose cgroups are in hybrid mode (this VM's); limits at or below
    // the host's: podman's defaults raise them, which needs CAP_SYS_RESOURCE (docs/scale.md).
    let run = std::process::Command::new("podman")
        .args([
            "run",
            "--rm",
            "--privileged",
            "--network",
            "none",
            "--runtime",
            "runc",
        ])
        .args([
            "--ulimit",
            "nofile=8192:8192",
            "--ulimit",
            "nproc=4096:4096",
            "-v",
        ])
        .arg(format!("{}:/work", dir.display()))
        .args([
            &tag,
            "run",
            "/work/one.toml",
            "--out",
            "/work/out",
            "--json",
        ])
        .output()
        .unwrap();
    // The test's own image goes, whatever the run did.
    let _ = std::process::Command::new("podman")
        .args(["rmi", "--force", &tag])
        .output();
    let doc = json(&run);
    assert_eq!(doc["ran"], 1, "{doc:#}");
    assert_eq!(doc["failed"], 0, "{doc:#}");
    assert!(dir.join("out/results.sqlite").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

//! The system packages the build and CI need: checked with dpkg-query,
//! installed with apt-get when xtask runs as root, otherwise named in the
//! one command line that installs them.
//!
//! This is the only list of them: `.ci/run`, `cargo xtask example` and
//! `cargo xtask ci` all come here, so README, CI and a fresh machine agree.
//! xtask itself has no native dependency, so it builds before any of them
//! is installed.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Result};

use crate::cli::Args;
use crate::process;

/// What a command is about to build or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Building the workspace: librdkafka (cmake, with SSL, SASL and zlib),
    /// RocksDB (C++) and its bindgen bindings.
    Build,
    /// Everything `cargo xtask ci` runs: the build, plus a JDK and Maven for
    /// the Kafka broker, the schema registry and Apache Kafka Streams.
    Ci,
}

impl Scope {
    fn requirements(self) -> Vec<&'static Requirement> {
        match self {
            Scope::Build => BUILD.iter().collect(),
            Scope::Ci => BUILD.iter().chain(JAVA).collect(),
        }
    }
}

/// One Debian package the build needs.
#[derive(Debug)]
struct Requirement {
    package: &'static str,
    /// Why, for the message that asks for it.
    needed_for: &'static str,
    /// What else satisfies it, for a tool installed without apt.
    unless: Option<Alternative>,
}

#[derive(Debug)]
enum Alternative {
    /// This command is on PATH (a JDK or Maven unpacked by hand, cmake from pip).
    Command(&'static str),
    /// This environment variable is set (bindgen's LIBCLANG_PATH names a libclang).
    Env(&'static str),
}

const BUILD: &[Requirement] = &[
    Requirement {
        package: "gcc",
        needed_for: "the C compiler of librdkafka and zstd",
        unless: Some(Alternative::Command("cc")),
    },
    Requirement {
        package: "g++",
        needed_for: "the C++ compiler of RocksDB",
        unless: Some(Alternative::Command("c++")),
    },
    Requirement {
        package: "make",
        needed_for: "the build tool that cmake generates for",
        unless: Some(Alternative::Command("make")),
    },
    Requirement {
        package: "cmake",
        needed_for: "librdkafka's build",
        unless: Some(Alternative::Command("cmake")),
    },
    Requirement {
        package: "pkg-config",
        needed_for: "finding OpenSSL, SASL and zlib",
        unless: Some(Alternative::Command("pkg-config")),
    },
    Requirement {
        package: "libclang-dev",
        needed_for: "bindgen, which generates RocksDB's bindings",
        unless: Some(Alternative::Env("LIBCLANG_PATH")),
    },
    Requirement {
        package: "libssl-dev",
        needed_for: "librdkafka's TLS and SASL SCRAM/OAUTHBEARER",
        unless: None,
    },
    Requirement {
        package: "zlib1g-dev",
        needed_for: "librdkafka's gzip compression",
        unless: None,
    },
    Requirement {
        package: "libsasl2-dev",
        needed_for: "librdkafka's SASL GSSAPI (Kerberos), through Cyrus SASL",
        unless: None,
    },
    Requirement {
        package: "libcurl4-openssl-dev",
        // rdkafka-sys builds librdkafka WITH_CURL=0 (its `curl` feature is
        // off), but librdkafka 2.12's config.h then defines
        // WITH_OAUTHBEARER_OIDC as 0 and rdkafka_conf.c tests it with
        // #ifdef: the header is included, nothing of libcurl is linked.
        needed_for: "the curl/curl.h that librdkafka 2.12's rdkafka_conf.c includes",
        unless: None,
    },
];

const JAVA: &[Requirement] = &[
    Requirement {
        package: "openjdk-17-jdk-headless",
        needed_for: "the Kafka broker, the schema registry and Apache Kafka Streams",
        unless: Some(Alternative::Command("javac")),
    },
    Requirement {
        package: "maven",
        needed_for: "resolving Kafka, the registry and the compat side",
        unless: Some(Alternative::Command("mvn")),
    },
];

/// `cargo xtask setup [--ci] [--check]`.
pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let scope = if args.flag("ci") {
        Scope::Ci
    } else {
        Scope::Build
    };
    let check_only = args.flag("check");
    args.finish()?;
    let outcome = if check_only {
        match missing_now(scope)? {
            Some(missing) if !missing.is_empty() => bail!("{}", not_root_message(&missing)),
            Some(_) => Checked::Present,
            None => Checked::Unchecked,
        }
    } else {
        ensure(scope)?
    };
    if outcome == Checked::Present {
        eprintln!("setup: every system package is present");
    }
    Ok(ExitCode::SUCCESS)
}

/// What [`ensure`] could say about the system packages.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Every one is installed (now, or already).
    Present,
    /// Not a Debian system: nothing could be checked (and it said so).
    Unchecked,
}

/// Makes sure the packages `scope` needs are there: installs the missing
/// ones as root, fails with the command that installs them otherwise.
pub(crate) fn ensure(scope: Scope) -> Result<Checked> {
    let Some(missing) = missing_now(scope)? else {
        return Ok(Checked::Unchecked);
    };
    if missing.is_empty() {
        return Ok(Checked::Present);
    }
    if !is_root() {
        bail!("{}", not_root_message(&missing));
    }
    install(&missing)?;
    let still = missing_now(scope)?.unwrap_or_default();
    if !still.is_empty() {
        let names: Vec<_> = still.iter().map(|r| r.package).collect();
        bail!(
            "apt-get installed, but these are still not there: {}",
            names.join(" ")
        );
    }
    Ok(Checked::Present)
}

/// The requirements of `scope` this machine lacks; `None` where dpkg-query
/// does not exist (not Debian), after saying what to install by hand.
fn missing_now(scope: Scope) -> Result<Option<Vec<&'static Requirement>>> {
    let requirements = scope.requirements();
    if !on_path("dpkg-query") {
        let names: Vec<_> = requirements.iter().map(|r| r.package).collect();
        eprintln!(
            "setup: no dpkg-query here, so system packages are not checked; the build needs \
             the equivalents of Debian's {}",
            names.join(" ")
        );
        return Ok(None);
    }
    let mut query = Command::new("dpkg-query");
    query
        .args(["-W", "-f", "${Package}\\t${db:Status-Status}\\n"])
        .args(requirements.iter().map(|r| r.package))
        .stdin(Stdio::null())
        // Packages dpkg never heard of are reported on stderr, with exit
        // status 1: they are simply not installed.
        .stderr(Stdio::null());
    let output = query
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run dpkg-query to check the system packages: {e}"))?;
    let installed = installed_packages(&String::from_utf8_lossy(&output.stdout));
    Ok(Some(missing(&requirements, &installed, on_path, |name| {
        std::env::var_os(name).is_some_and(|v| !v.is_empty())
    })))
}

/// The packages that dpkg-query's `${Package}\t${db:Status-Status}` lines
/// report installed. A removed package whose config files remain
/// (`config-files`) or a half-done install is not.
fn installed_packages(dpkg_output: &str) -> HashSet<String> {
    dpkg_output
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(_, status)| {
            // Triggers awaited or pending: unpacked and configured, only a
            // trigger of another package is still to run.
            matches!(
                status.trim(),
                "installed" | "triggers-awaited" | "triggers-pending"
            )
        })
        .map(|(package, _)| package.trim().to_owned())
        .collect()
}

fn missing<'r>(
    requirements: &[&'r Requirement],
    installed: &HashSet<String>,
    command_exists: impl Fn(&str) -> bool,
    env_set: impl Fn(&str) -> bool,
) -> Vec<&'r Requirement> {
    requirements
        .iter()
        .copied()
        .filter(|r| !installed.contains(r.package))
        .filter(|r| match r.unless {
            Some(Alternative::Command(command)) => !command_exists(command),
            Some(Alternative::Env(name)) => !env_set(name),
            None => true,
        })
        .collect()
}

/// The one line that installs `missing` (for a user who is not root).
fn install_command(missing: &[&Requirement]) -> String {
    let names: Vec<_> = missing.iter().map(|r| r.package).collect();
    format!(
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
        names.join(" ")
    )
}

fn not_root_message(missing: &[&Requirement]) -> String {
    let why: Vec<String> = missing
        .iter()
        .map(|r| format!("  {} ({})", r.package, r.needed_for))
        .collect();
    format!(
        "system packages missing:\n{}\ninstall them with this line, then run the command again:\n{}",
        why.join("\n"),
        install_command(missing)
    )
}

fn install(missing: &[&Requirement]) -> Result<()> {
    let names: Vec<_> = missing.iter().map(|r| r.package).collect();
    eprintln!("setup: installing {}", names.join(" "));
    let apt = |args: &[&str]| {
        let mut command = Command::new("apt-get");
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        command
    };
    // A stale or unreachable index need not stop the install: the packages
    // may be in the one apt already has.
    if let Err(error) = process::run(&mut apt(&["update", "-q"]), "apt-get update") {
        eprintln!("setup: {error:#}; installing from the index apt has");
    }
    let mut install_args = vec!["install", "-y", "-q", "--no-install-recommends"];
    install_args.extend(&names);
    process::run(&mut apt(&install_args), "apt-get install")
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) takes nothing, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `command` is an executable file in a directory of PATH.
fn on_path(command: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(command)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(requirements: &[&Requirement]) -> Vec<&'static str> {
        requirements.iter().map(|r| r.package).collect()
    }

    fn installed(packages: &[&str]) -> HashSet<String> {
        packages.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn dpkg_output_counts_only_installed_packages() {
        let output = "libclang-dev\tinstalled\n\
                      libssl-dev\tconfig-files\n\
                      cmake\thalf-configured\n\
                      zlib1g-dev\ttriggers-pending\n\
                      maven\tnot-installed\n\
                      garbage line without a tab\n";
        let mut got: Vec<_> = installed_packages(output).into_iter().collect();
        got.sort();
        assert_eq!(got, ["libclang-dev", "zlib1g-dev"]);
    }

    #[test]
    fn a_package_is_missing_unless_installed_or_replaced() {
        let requirements = Scope::Ci.requirements();
        let have = installed(&["libssl-dev", "libcurl4-openssl-dev", "maven"]);
        let commands = ["cc", "c++", "make", "pkg-config", "javac"];
        let got = missing(
            &requirements,
            &have,
            |c| commands.contains(&c),
            |name| name == "LIBCLANG_PATH",
        );
        assert_eq!(names(&got), ["cmake", "zlib1g-dev", "libsasl2-dev"]);

        let nothing = missing(&requirements, &installed(&[]), |_| false, |_| false);
        assert_eq!(nothing.len(), BUILD.len() + JAVA.len());
    }

    #[test]
    fn the_build_scope_leaves_java_out() {
        let build = names(&Scope::Build.requirements());
        assert!(build.contains(&"libclang-dev") && build.contains(&"g++"));
        assert!(!build.contains(&"maven"));
        let ci = names(&Scope::Ci.requirements());
        assert!(ci.contains(&"maven") && ci.contains(&"openjdk-17-jdk-headless"));
    }

    #[test]
    fn the_not_root_message_gives_one_line_that_installs_everything_missing() {
        let requirements = Scope::Build.requirements();
        let lacking = missing(
            &requirements,
            &installed(&["libssl-dev", "zlib1g-dev", "libsasl2-dev"]),
            |c| c != "c++" && c != "pkg-config",
            |_| false,
        );
        let message = not_root_message(&lacking);
        let last = message.lines().last().unwrap();
        assert_eq!(
            last,
            "sudo apt-get update && sudo apt-get install -y --no-install-recommends \
             g++ pkg-config libclang-dev libcurl4-openssl-dev"
        );
        assert!(message.contains("libclang-dev (bindgen"), "{message}");
    }

    #[test]
    fn only_executable_files_count_as_commands() {
        let dir = std::env::temp_dir().join(format!("xtask-setup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tool = dir.join("a-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!is_executable(&tool));
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(is_executable(&tool));
        assert!(!is_executable(&dir), "a directory is not a command");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

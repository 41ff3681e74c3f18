//! Java and Maven: the Kafka release everything uses, and resolving classpaths.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

use crate::process;

/// The Apache Kafka release of the test broker and of the Kafka Streams
/// reference side. Both poms default to it too (checked by a test below).
pub(crate) const KAFKA_VERSION: &str = "4.4.0";

/// Runs another Kafka release than [`KAFKA_VERSION`] for one invocation, e.g.
/// `KSTREAMS_KAFKA_VERSION=4.1.2 cargo xtask kafka start` to check a broker
/// without the streams group protocol (KIP-1071, generally available from
/// 4.2). The compat scenarios' expectations are those of [`KAFKA_VERSION`].
pub(crate) const KAFKA_VERSION_ENV: &str = "KSTREAMS_KAFKA_VERSION";

/// The Kafka release this invocation uses: [`KAFKA_VERSION_ENV`] when set, else
/// [`KAFKA_VERSION`]. Only `major.minor.patch` is accepted: the value becomes a
/// Maven version and a cache directory name.
pub(crate) fn kafka_version() -> Result<String> {
    match std::env::var(KAFKA_VERSION_ENV) {
        Ok(version) if !version.is_empty() => {
            if release(&version).is_none() {
                bail!("{KAFKA_VERSION_ENV}={version:?} is not a Kafka release such as 4.4.0");
            }
            Ok(version)
        }
        _ => Ok(KAFKA_VERSION.to_owned()),
    }
}

/// `(major, minor, patch)` of a release string such as `4.4.0`.
pub(crate) fn release(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.split('.').map(|part| {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u32>().ok())
            .flatten()
    });
    let parsed = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(parsed)
}

/// Fails with an install hint when java or mvn is missing, and on a malformed
/// [`KAFKA_VERSION_ENV`] (before Maven gets to fail on it less clearly).
pub(crate) fn require_java_and_maven() -> Result<()> {
    kafka_version()?;
    process::require_tool(
        "java",
        "-version",
        "install a JDK 17 or newer (Debian: apt-get install openjdk-17-jdk-headless)",
    )?;
    process::require_tool(
        "mvn",
        "--version",
        "install Apache Maven 3.8 or newer (Debian: apt-get install maven)",
    )
}

/// `mvn` in batch mode, quiet, with the Kafka release set.
pub(crate) fn mvn(pom: &Path) -> Command {
    // require_java_and_maven ran first and rejected a malformed override.
    let version = kafka_version().unwrap_or_else(|_| KAFKA_VERSION.to_owned());
    let mut command = Command::new("mvn");
    command
        .args(["-B", "-q", "-Dstyle.color=never"])
        .arg(format!("-Dkafka.version={version}"))
        .arg("-f")
        .arg(pom);
    command
}

/// The runtime classpath of `pom`, resolved once and kept in `cache` until the
/// pom changes, the Kafka release changes or a jar disappears. The second
/// element tells whether Maven ran.
pub(crate) fn classpath(pom: &Path, cache: &Path) -> Result<(String, bool)> {
    if let Some(cached) = cached_classpath(pom, cache) {
        return Ok((cached, false));
    }
    if let Some(dir) = cache.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    process::run_captured(
        mvn(pom)
            .arg("dependency:build-classpath")
            .arg(format!("-Dmdep.outputFile={}", cache.display())),
        "resolving the Kafka jars with Maven",
    )?;
    touch(cache)?;
    stamp_kafka_version(cache)?;
    let classpath = read_classpath(cache)?;
    Ok((classpath, true))
}

fn cached_classpath(pom: &Path, cache: &Path) -> Option<String> {
    if modified(cache)? < modified(pom)? || !stamped_with_kafka_version(cache) {
        return None;
    }
    let classpath = read_classpath(cache).ok()?;
    all_exist(&classpath).then_some(classpath)
}

/// Whether every entry of `classpath` exists: a pruned or relocated Maven
/// repository leaves a cached classpath that names missing jars.
pub(crate) fn all_exist(classpath: &str) -> bool {
    std::env::split_paths(classpath).all(|jar| jar.exists())
}

fn read_classpath(file: &Path) -> Result<String> {
    let classpath = fs::read_to_string(file)
        .with_context(|| format!("Maven wrote no classpath to {}", file.display()))?;
    let classpath = classpath.trim().to_owned();
    if classpath.is_empty() {
        bail!("Maven resolved an empty classpath into {}", file.display());
    }
    Ok(classpath)
}

/// Marks a classpath file Maven just wrote as fresh. The dependency plugin
/// leaves an unchanged file alone, so after a pom or source edit the old file
/// would otherwise look stale on every run.
pub(crate) fn touch(path: &Path) -> Result<()> {
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()))
        .with_context(|| format!("cannot touch {}", path.display()))
}

/// Records which Kafka release `classpath_file` was resolved for. The pom's
/// mtime alone misses a release chosen with [`KAFKA_VERSION_ENV`], which
/// changes no file: the next run would reuse the other release's jars.
pub(crate) fn stamp_kafka_version(classpath_file: &Path) -> Result<()> {
    let stamp = version_stamp(classpath_file);
    fs::write(&stamp, kafka_version()?).with_context(|| format!("cannot write {}", stamp.display()))
}

/// Whether `classpath_file` was resolved for the Kafka release this
/// invocation uses (false for one written before the stamp existed).
pub(crate) fn stamped_with_kafka_version(classpath_file: &Path) -> bool {
    let stamped = fs::read_to_string(version_stamp(classpath_file));
    matches!((stamped, kafka_version()), (Ok(s), Ok(v)) if s.trim() == v)
}

/// `classpath.txt` -> `classpath.txt.kafka-version`, beside it.
fn version_stamp(classpath_file: &Path) -> PathBuf {
    let mut name = classpath_file.file_name().unwrap_or_default().to_owned();
    name.push(".kafka-version");
    classpath_file.with_file_name(name)
}

/// Modification time; `None` when the file does not exist.
pub(crate) fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of any file under `dir` (recursively).
pub(crate) fn newest_under(dir: &Path) -> Option<SystemTime> {
    let mut newest = modified(dir);
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path: PathBuf = entry.path();
        let time = if path.is_dir() {
            newest_under(&path)
        } else {
            modified(&path)
        };
        newest = newest.max(time);
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::repo_root;

    /// The broker and the reference side must run the same Kafka release even
    /// when someone runs Maven by hand, without xtask's -Dkafka.version.
    #[test]
    fn poms_default_to_the_same_kafka_release() {
        let expected = format!("<kafka.version>{KAFKA_VERSION}</kafka.version>");
        for pom in [
            "xtask/kafka/pom.xml",
            "compat/pom.xml",
            "xtask/registry/pom.xml",
        ] {
            let text = fs::read_to_string(repo_root().join(pom)).unwrap();
            assert!(text.contains(&expected), "{pom} should say {expected}");
        }
    }

    /// A classpath resolved for one release is not reused for another.
    #[test]
    fn a_classpath_stamped_with_another_release_is_stale() {
        let dir = std::env::temp_dir().join(format!("xtask-stamp-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let classpath_file = dir.join("classpath.txt");
        fs::write(&classpath_file, "a.jar").unwrap();
        assert!(!stamped_with_kafka_version(&classpath_file), "no stamp yet");
        stamp_kafka_version(&classpath_file).unwrap();
        assert!(stamped_with_kafka_version(&classpath_file));
        // No release this invocation can be running (the env accepts only x.y.z).
        fs::write(version_stamp(&classpath_file), "another").unwrap();
        assert!(!stamped_with_kafka_version(&classpath_file));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn releases_parse_and_other_strings_do_not() {
        assert_eq!(release("4.4.0"), Some((4, 4, 0)));
        assert_eq!(release(KAFKA_VERSION).map(|r| r.0), Some(4));
        for bad in ["4.4", "4.4.0.1", "4.4.0-rc1", "4..0", "../4.4.0", ""] {
            assert_eq!(release(bad), None, "{bad:?}");
        }
    }
}

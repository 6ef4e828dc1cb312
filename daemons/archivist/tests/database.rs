//! The database settings as the binary reads them: `init` creates the schema in the
//! database the environment names, a password given as `--database-url` is refused
//! without being shown, and `config check` names an unusable URL (password redacted).

mod support;

use support::Env;

#[test]
fn init_creates_the_schema_and_database_passwords_stay_off_the_command_line() {
    let env = Env::fresh("database");
    let out = env.ok(&["init"]);
    let shown = archivist_db::redact(&env.database);
    let version = archivist_db::Database::known_schema_version();
    assert!(
        out.contains(&format!("database {shown} at schema version {version}")),
        "{out}"
    );
    // Again: idempotent, same version.
    assert!(env
        .ok(&["init"])
        .contains(&format!("at schema version {version}")));

    let refused = env.run(&[
        "--database-url",
        "postgres://archivist:hunter2@127.0.0.1:1/archivist",
        "init",
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("refused") && stderr.contains("archivist:***@127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let mut bad = env.clone();
    bad.database = "mysql://archivist:hunter2@127.0.0.1/archivist".into();
    let checked = bad.run(&["config", "check"]);
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(!checked.status.success());
    assert!(stderr.contains("mysql://archivist:***@"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

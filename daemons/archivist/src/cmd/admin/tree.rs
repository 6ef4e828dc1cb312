//! `archivist tree [PATH]`: the raw tree, readable.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use archivist_admin::tree::TreeNode;
use archivist_admin::AdminSettings;
use clap::Args;

use super::progress::Bar;
use super::render::emit;
use crate::cli::GlobalOpts;

/// Arguments of `tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Subtree to show, relative to the chroot (e.g. `/jobs`, `/queues/failed`).
    #[arg(default_value = "/")]
    pub path: String,
    /// Names and annotations only, no data.
    #[arg(long)]
    pub names_only: bool,
}

/// Runs `tree`.
pub async fn run(global: &GlobalOpts, args: TreeArgs) -> Result<ExitCode> {
    let session = crate::context::connect_initialised(global).await?;
    let nodes = archivist_admin::tree::tree(
        &session,
        &AdminSettings::default(),
        &args.path,
        &Bar::stderr(),
    )
    .await?;
    emit(global.output, &nodes, |n| render(n, args.names_only))?;
    Ok(ExitCode::SUCCESS)
}

fn depth(path: &str) -> usize {
    path.split('/').filter(|s| !s.is_empty()).count()
}

fn render(nodes: &[TreeNode], names_only: bool) -> String {
    let base = nodes.first().map(|n| depth(&n.path)).unwrap_or(0);
    let mut out = String::new();
    for (i, node) in nodes.iter().enumerate() {
        let indent = "  ".repeat(depth(&node.path).saturating_sub(base));
        let name = if i == 0 {
            node.path.as_str()
        } else {
            node.path.rsplit('/').next().unwrap_or_default()
        };
        let mut notes = Vec::new();
        if let Some(t) = node.decoded.data_type.as_deref().filter(|t| *t != "none") {
            notes.push(t.to_string());
        }
        if node.path.starts_with("/counters/") {
            notes.push(format!("value {}", node.stat.version));
        }
        if node.kind == "ephemeral" {
            notes.push(format!(
                "ephemeral, session {}",
                node.owner.as_deref().unwrap_or("?")
            ));
        }
        if node.stat.children > 0 {
            notes.push(format!("{} children", node.stat.children));
        }
        if let Some(e) = &node.decoded.entry {
            notes.push(format!(
                "job {} priority {} curated {}",
                e.job, e.priority, e.curated
            ));
        }
        let _ = writeln!(
            out,
            "{indent}{name}{}",
            if notes.is_empty() {
                String::new()
            } else {
                format!("  [{}]", notes.join("; "))
            }
        );
        if let Some(error) = &node.decoded.error {
            let _ = writeln!(out, "{indent}    !! {error}");
        }
        if names_only {
            continue;
        }
        if let Some(data) = &node.decoded.data {
            let text = serde_yaml::to_string(data).unwrap_or_default();
            for line in text.lines() {
                let _ = writeln!(out, "{indent}    {line}");
            }
        }
    }
    out
}

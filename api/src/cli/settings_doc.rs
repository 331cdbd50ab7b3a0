//! Every setting as the command line defines it (flag, variable, default,
//! help, the commands that take it), read from clap's own definition of
//! `leadpipe`: `docs/guide/configuration.md`'s table is generated from it,
//! and `deploy/leadpipe.env.example` is checked against it
//! (tests/it/configuration.rs), so neither can drift from the code.

use clap::{ArgAction, Command, CommandFactory};

use super::Cli;
use crate::config::ENVIRONMENT_ONLY;

/// One setting: an environment variable, and the flag that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub env: String,
    /// `--database-url`; `None` for a variable read outside the command line.
    pub flag: Option<String>,
    /// The default as the variable would spell it (`None`: unset).
    pub default: Option<String>,
    /// An on/off flag: present or absent, no value.
    pub switch: bool,
    /// Hidden from `--help` (retired, or environment-first).
    pub hidden: bool,
    /// The commands that take it (`serve`, `source add`); empty: every command.
    pub commands: Vec<String>,
    /// What it does: its long help, and the commands it says that for (a
    /// flag that several commands define with different help has several).
    pub meanings: Vec<(Vec<String>, String)>,
}

impl Setting {
    /// Taken by `serve` or `work` (or every command): a setting of the
    /// service, which the systemd units' environment file lists.
    pub fn is_service_setting(&self) -> bool {
        self.commands.is_empty() || self.commands.iter().any(|c| c == "serve" || c == "work")
    }
}

/// Every setting: those with a variable in the command line's definition,
/// in the order `leadpipe --help` and its subcommands show them, then the
/// variables read outside it ([`ENVIRONMENT_ONLY`]).
pub fn settings() -> Vec<Setting> {
    // Built, as parsing would: switches get their `false` default.
    let mut command = Cli::command();
    command.build();
    let mut settings = Vec::new();
    collect(&command, &[], &mut settings);
    for only in ENVIRONMENT_ONLY {
        settings.push(Setting {
            env: only.env.to_owned(),
            flag: None,
            default: Some(only.default.to_owned()),
            switch: false,
            hidden: false,
            commands: Vec::new(),
            meanings: vec![(Vec::new(), only.meaning.to_owned())],
        });
    }
    settings
}

fn collect(command: &Command, path: &[&str], settings: &mut Vec<Setting>) {
    let name = path.join(" ");
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        // Global flags are defined on `leadpipe` itself and taken by every
        // command: no command list.
        let commands: Vec<String> = if arg.is_global_set() || path.is_empty() {
            Vec::new()
        } else {
            vec![name.clone()]
        };
        if let Some(seen) = settings.iter_mut().find(|s| s.env == env) {
            seen.commands.extend(commands.iter().cloned());
            match seen.meanings.iter_mut().find(|(_, m)| *m == help) {
                Some((said_for, _)) => said_for.extend(commands),
                None => seen.meanings.push((commands, help)),
            }
            continue;
        }
        let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        settings.push(Setting {
            env: env.to_owned(),
            flag: arg.get_long().map(|long| format!("--{long}")),
            default: (!defaults.is_empty()).then(|| defaults.join(",")),
            switch,
            hidden: arg.is_hide_set(),
            commands: commands.clone(),
            meanings: vec![(commands, help)],
        });
    }
    for sub in command.get_subcommands() {
        let mut path = path.to_vec();
        path.push(sub.get_name());
        collect(sub, &path, settings);
    }
}

/// The Markdown table of every setting, as `docs/guide/configuration.md`
/// carries it between its `settings` markers.
pub fn markdown_table() -> String {
    let mut table = String::from(
        "| flag | environment | default | commands | meaning |\n|---|---|---|---|---|\n",
    );
    for setting in settings() {
        let flag = match &setting.flag {
            Some(flag) => format!("`{flag}`"),
            None => "(environment only)".to_owned(),
        };
        let default = match setting.default.as_deref() {
            None | Some("false") if setting.switch => "off".to_owned(),
            None => "unset".to_owned(),
            Some("") => "empty".to_owned(),
            Some(value) => format!("`{value}`"),
        };
        let commands = if setting.commands.is_empty() {
            "all".to_owned()
        } else {
            setting.commands.join(", ")
        };
        let meaning = match setting.meanings.as_slice() {
            [(_, only)] => cell(only),
            several => several
                .iter()
                .map(|(commands, meaning)| {
                    format!("`{}`: {}", commands.join("`, `"), cell(meaning))
                })
                .collect::<Vec<_>>()
                .join(". "),
        };
        let meaning = if setting.hidden {
            format!("{meaning} (not shown by `--help`)")
        } else {
            meaning
        };
        table.push_str(&format!(
            "| {flag} | `{}` | {default} | {commands} | {meaning} |\n",
            setting.env
        ));
    }
    table
}

/// Help text as one table cell: one line, pipes escaped, its last full
/// stop dropped (the table's style), `docs/…` paths as links.
fn cell(help: &str) -> String {
    let text = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.strip_suffix('.').unwrap_or(&text).replace('|', "\\|");
    link_docs(&text)
}

/// `docs/guide/operations.md#read-replicas` (as the help says it, for a
/// terminal) as a link from `docs/guide/`, where the table lives.
fn link_docs(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let end = from
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-#".contains(c)))
            .unwrap_or(from.len());
        // A sentence's full stop is not part of the path.
        let path = from[..end].trim_end_matches('.');
        if path.contains(".md") {
            let inside = &path["docs/".len()..];
            let target = match inside.strip_prefix("guide/") {
                Some(here) => here.to_owned(),
                None => format!("../{inside}"),
            };
            out.push_str(&format!("[{path}]({target})"));
        } else {
            out.push_str(path);
        }
        rest = &from[path.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_paths_become_links_from_the_guide() {
        assert_eq!(
            link_docs("see docs/guide/operations.md#read-replicas."),
            "see [docs/guide/operations.md#read-replicas](operations.md#read-replicas)."
        );
        assert_eq!(
            link_docs("(docs/security/secrets.md) and docs/ alone"),
            "([docs/security/secrets.md](../security/secrets.md)) and docs/ alone"
        );
    }

    #[test]
    fn a_setting_of_several_commands_is_one_row() {
        let settings = settings();
        let metrics: Vec<_> = settings
            .iter()
            .filter(|s| s.env == "LEADPIPE_METRICS_BIND")
            .collect();
        assert_eq!(metrics.len(), 1);
        assert_eq!(metrics[0].commands, ["serve", "work"]);
        let database = settings.iter().find(|s| s.env == "DATABASE_URL");
        assert!(database.is_some_and(|s| s.commands.is_empty()), "global");
    }

    #[test]
    fn the_arena_default_listed_is_the_one_set() {
        let arenas = ENVIRONMENT_ONLY
            .iter()
            .find(|only| only.env == "MALLOC_ARENA_MAX")
            .map(|only| only.default);
        assert_eq!(arenas, Some(malloc::DEFAULT_ARENAS.to_string().as_str()));
    }
}

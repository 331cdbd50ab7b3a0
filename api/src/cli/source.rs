//! `leadpipe source …`: the same operations as `/api/sources`, straight on
//! the database.

use super::output::OutputArgs;
use domain::store::Store;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use domain::inbound::signature::{Scheme, generate_standard_secret};
use domain::inbound::source::state::{self, SourceState};
use domain::inbound::source::{self, NewSource, SourceConfig, SourcePatch};
use domain::net_guard::OutboundPolicy;
use domain::precondition::IfMatch;
use domain::sealed::Keyring;
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Exit, Failure, describe};
use crate::wire::sources::SourceOut;

// Parsed once per run: the size of the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Create a webhook source. An existing name is refused: change a
    /// source with `source update`.
    Add(SourceArgs),
    /// Change a webhook source: only the options given change (`--reset F`
    /// puts field F back to its default). A new --scheme needs the secrets
    /// again.
    Update(UpdateArgs),
    /// List sources (secrets are never shown).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Remove a webhook source: its secrets go, deliveries to its name are
    /// refused as to an unknown name, the intake tokens bound to it are
    /// revoked and its waiting events end dead; its events and leads stay.
    Remove {
        /// The source to remove.
        name: String,
    },
    /// Pause a webhook source: its deliveries are still verified, stored
    /// and answered, but not processed until it is resumed.
    Pause {
        /// The source to pause.
        name: String,
    },
    /// Resume a paused webhook source: its held events are processed in
    /// the order they arrived.
    Resume {
        /// The source to resume.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The source's name: its webhook URL is `/webhooks/{name}`, and its
    /// leads' `source`.
    #[arg(long)]
    name: String,
    /// How its webhooks are signed (see docs/guide/webhooks.md#sources).
    #[arg(long, value_parser = super::one_of(Scheme::ALL.map(Scheme::as_str)))]
    scheme: String,
    #[command(flatten)]
    secrets: SecretArgs,
    /// standard-webhooks: generate a whsec_ secret and print it once.
    #[arg(long, conflicts_with_all = ["secrets", "secret_file", "secret_env"])]
    generate_secret: bool,
    #[command(flatten)]
    fields: FieldArgs,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The source to change.
    #[arg(long)]
    name: String,
    /// A new scheme: only with new secrets (they are checked against the
    /// scheme they are for).
    #[arg(long, value_parser = super::one_of(Scheme::ALL.map(Scheme::as_str)))]
    scheme: Option<String>,
    /// New secrets replace the stored ones; without, they are kept.
    #[command(flatten)]
    secrets: SecretArgs,
    #[command(flatten)]
    fields: FieldArgs,
    /// Put this field back to its default (repeatable); `pull_url` turns
    /// reconcile off, with its auth header, value and cron.
    #[arg(long, value_name = "FIELD", value_parser = super::one_of(RESETTABLE))]
    reset: Vec<String>,
}

/// The fields `source update --reset` puts back to their defaults, named as
/// in the API.
const RESETTABLE: [&str; 20] = [
    "events_pointer",
    "tolerance_secs",
    "signature_header",
    "event_id_header",
    "event_id_pointer",
    "event_type_header",
    "event_type_pointer",
    "allowed_event_types",
    "record_pointer",
    "source_ref_pointer",
    "email_pointer",
    "name_pointer",
    "phone_pointer",
    "company_pointer",
    "updated_at_pointer",
    "pull_url",
    "pull_auth_header",
    "pull_page_size",
    "cron",
    "expected_interval",
];

/// Where the verification secrets come from.
#[derive(Debug, Args)]
pub struct SecretArgs {
    /// A verification secret; repeat for rotation (any may match).
    /// Discouraged: argv is visible to every user of the machine (`ps`); use
    /// --secret-file or --secret-env.
    #[arg(long = "secret")]
    secrets: Vec<String>,
    /// Read the secrets from this file, one a line (`-`: standard input).
    #[arg(long, conflicts_with = "secrets")]
    secret_file: Option<PathBuf>,
    /// Read the secrets from this environment variable, one a line.
    #[arg(long, value_name = "VAR", conflicts_with_all = ["secrets", "secret_file"])]
    secret_env: Option<String>,
}

/// Everything of a source but its name, scheme and secrets, named as in the
/// API: serialised, the options given are the fields of the request body
/// ([`FieldArgs::given`]), so the command line builds the domain's own input
/// types (`SourceConfig`, `SourcePatch`) as the API reads them.
#[derive(Debug, Args, Serialize)]
pub struct FieldArgs {
    /// How old a signed timestamp may be, in seconds (1 to 86400; default 300).
    #[arg(long)]
    tolerance_secs: Option<i64>,
    /// hmac-sha256: the header carrying the signature (default x-signature).
    #[arg(long)]
    signature_header: Option<String>,
    /// The header holding the event id (default: per scheme).
    #[arg(long, conflicts_with = "event_id_pointer")]
    event_id_header: Option<String>,
    /// A JSON pointer to the event id in the body, instead of a header.
    #[arg(long)]
    event_id_pointer: Option<String>,
    /// The header holding the event type (default: per scheme).
    #[arg(long, conflicts_with = "event_type_pointer")]
    event_type_header: Option<String>,
    /// A JSON pointer to the event type in the body, instead of a header.
    #[arg(long)]
    event_type_pointer: Option<String>,
    /// An event type to process (repeatable); others are stored as skipped.
    /// On an update, the ones given replace the list.
    #[arg(long = "allow-event-type")]
    allowed_event_types: Vec<String>,
    /// Where the lead record sits in the body (default /data; "": the
    /// whole body).
    #[arg(long)]
    record_pointer: Option<String>,
    /// Within the record: the sender's id of the lead (default /id).
    #[arg(long)]
    source_ref_pointer: Option<String>,
    /// Within the record: the email (default /email).
    #[arg(long)]
    email_pointer: Option<String>,
    /// Within the record: the name (default /name).
    #[arg(long)]
    name_pointer: Option<String>,
    /// Within the record: the phone (default /phone).
    #[arg(long)]
    phone_pointer: Option<String>,
    /// Within the record: the company (default /company).
    #[arg(long)]
    company_pointer: Option<String>,
    /// Within the record: when the sender last changed it (default
    /// /updated_at; RFC 3339 or a unix timestamp).
    #[arg(long)]
    updated_at_pointer: Option<String>,
    /// Reconcile: the sender's pull API, `GET {pull_url}?since=…&limit=…`.
    #[arg(long)]
    pull_url: Option<String>,
    /// A header sent with every pull, e.g. `authorization`.
    #[arg(long)]
    pull_auth_header: Option<String>,
    /// Its value (write-only; not given on an update: the stored one stays,
    /// unless pull_url moves to another origin). Discouraged on the command
    /// line: use the environment variable or --pull-auth-secret-file.
    ///
    /// The value of the source's pull auth header (`--pull-auth-header`),
    /// sealed at rest; see docs/guide/reconcile.md.
    #[arg(long, env = "LEADPIPE_PULL_AUTH_SECRET", hide_env_values = true)]
    #[serde(skip)]
    pull_auth_secret: Option<String>,
    /// Read the pull auth value from this file (`-`: standard input).
    #[arg(long, conflicts_with = "pull_auth_secret")]
    #[serde(skip)]
    pull_auth_secret_file: Option<PathBuf>,
    /// Records per pull request (1–1000, default 100).
    #[arg(long)]
    pull_page_size: Option<i64>,
    /// Reconcile by itself on this cron schedule, seconds field first
    /// (`0 */15 * * * *`: every quarter hour).
    #[arg(long)]
    cron: Option<String>,
    /// How often the source usually delivers (`30m`, `2h`, `1d`): the quiet
    /// alert compares its silence with this instead of a learned gap.
    #[arg(long)]
    expected_interval: Option<String>,
    /// Where a delivery's events sit when it carries several, `*` standing
    /// for every element of an array (default /entry/*/changes/* for
    /// meta-lead-ads, /* for hubspot-v3, else none).
    #[arg(long)]
    events_pointer: Option<String>,
    /// meta-lead-ads: the token Meta's subscription handshake must name
    /// (write-only; not given on an update: the stored one stays).
    /// Discouraged on the command line: use the environment variable.
    ///
    /// Sealed at rest, never shown; see docs/guide/webhooks.md#meta-lead-ads.
    #[arg(long, env = "LEADPIPE_VERIFY_TOKEN", hide_env_values = true)]
    #[serde(skip)]
    verify_token: Option<String>,
}

impl SecretArgs {
    /// The secrets given, read from where they were given; `None`: none.
    fn read(self) -> anyhow::Result<Option<Vec<String>>> {
        let given = match (&self.secret_file, &self.secret_env) {
            (Some(path), _) => Some((read_secret_file(path)?, path.display().to_string())),
            (None, Some(var)) => {
                let value = std::env::var(var)
                    .map_err(|_| anyhow::anyhow!("environment variable {var} is not set"))?;
                Some((value, var.clone()))
            }
            (None, None) => None,
        };
        let Some((text, from)) = given else {
            return Ok((!self.secrets.is_empty()).then_some(self.secrets));
        };
        let secrets: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        if secrets.is_empty() {
            anyhow::bail!("{from} holds no secret");
        }
        Ok(Some(secrets))
    }
}

/// Standard input can feed only one of the two secret files.
fn check_stdin_once(secrets: &SecretArgs, fields: &FieldArgs) -> anyhow::Result<()> {
    let stdin = Some(Path::new("-"));
    if secrets.secret_file.as_deref() == stdin && fields.pull_auth_secret_file.as_deref() == stdin {
        anyhow::bail!("only one of --secret-file and --pull-auth-secret-file can be `-`");
    }
    Ok(())
}

impl FieldArgs {
    /// The fields given, as the API's request bodies name them: an option
    /// left out, or no `--allow-event-type`, is not given. The pull auth
    /// value is not among them ([`FieldArgs::pull_auth_secret`]).
    fn given(&self) -> anyhow::Result<Map<String, Value>> {
        let Value::Object(mut fields) = serde_json::to_value(self)? else {
            anyhow::bail!("the source options do not serialise as an object");
        };
        fields.retain(|_, value| !(value.is_null() || value.as_array().is_some_and(Vec::is_empty)));
        Ok(fields)
    }

    /// The pull auth value given, read from its file if it was given so.
    fn pull_auth_secret(&mut self) -> anyhow::Result<Option<String>> {
        if let Some(path) = &self.pull_auth_secret_file {
            let value = read_secret_file(path)?;
            return Ok(Some(value.trim_end_matches(['\r', '\n']).to_owned()));
        }
        Ok(self.pull_auth_secret.take())
    }
}

/// A secret-bearing file's contents (`-`: standard input), so secrets need
/// not appear on the command line.
fn read_secret_file(path: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    }
    Ok(text)
}

pub async fn run_source(
    db: &Store,
    command: SourceCommand,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> anyhow::Result<()> {
    match command {
        SourceCommand::Add(args) => add(db, args, outbound, keys).await?,
        SourceCommand::Update(args) => update(db, args, outbound, keys).await?,
        SourceCommand::List { output } => {
            let sources: Vec<SourceOut> = source::list(db)
                .await?
                .into_iter()
                .map(SourceOut::from)
                .collect();
            output.print(
                &sources,
                &[
                    "name",
                    "scheme",
                    "state",
                    "secret_count",
                    "allowed_event_types",
                ],
            )?;
        }
        SourceCommand::Remove { name } => {
            let txn = db.begin_write().await?;
            let removal = state::remove(&*txn, &name, &IfMatch::Any)
                .await
                .map_err(missing(&name))?;
            txn.commit().await?;
            println!(
                "source '{name}' removed; {} intake principal(s) revoked, {} waiting event(s) \
                 now dead; its events and leads stay",
                removal.revoked_intake_principals, removal.abandoned_events
            );
        }
        SourceCommand::Pause { name } => {
            let paused = state::set_state(db, &name, SourceState::Paused, &IfMatch::Any)
                .await
                .map_err(missing(&name))?;
            show("paused", &SourceOut::from(paused))?;
        }
        SourceCommand::Resume { name } => {
            let resumed = state::set_state(db, &name, SourceState::Active, &IfMatch::Any)
                .await
                .map_err(missing(&name))?;
            workers::wake::announce_once(db, domain::store::Work::Inbox).await;
            show("resumed", &SourceOut::from(resumed))?;
        }
    }
    Ok(())
}

/// An unknown source is exit code 3, naming it.
fn missing(name: &str) -> impl FnOnce(domain::Error) -> anyhow::Error + '_ {
    move |err| match err {
        domain::Error::NotFound => Failure::error(
            Exit::NotFound,
            format!("no source '{name}' (`leadpipe source list` shows them)"),
        ),
        other => describe(other),
    }
}

async fn add(
    db: &Store,
    args: SourceArgs,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> anyhow::Result<()> {
    let SourceArgs {
        name,
        scheme,
        secrets,
        generate_secret,
        mut fields,
    } = args;
    check_stdin_once(&secrets, &fields)?;
    let secrets = secrets.read()?;
    let pull_auth_secret = fields.pull_auth_secret()?;
    let generated = if generate_secret {
        if scheme.parse::<Scheme>().ok() != Some(Scheme::StandardWebhooks) {
            anyhow::bail!("--generate-secret is for the standard-webhooks scheme");
        }
        Some(generate_standard_secret())
    } else {
        None
    };
    let secrets = match &generated {
        Some(secret) => Some(vec![secret.clone()]),
        None => secrets,
    };
    // The request body `POST /api/sources` takes, from the options given.
    let mut body = fields.given()?;
    body.insert("name".into(), name.clone().into());
    body.insert("scheme".into(), scheme.into());
    if let Some(secrets) = secrets {
        body.insert("secrets".into(), secrets.into());
    }
    if let Some(secret) = pull_auth_secret {
        body.insert("pull_auth_secret".into(), secret.into());
    }
    if let Some(token) = fields.verify_token.take() {
        body.insert("verify_token".into(), token.into());
    }
    let input: SourceConfig = serde_json::from_value(Value::Object(body))?;
    let new = NewSource::parse(input, outbound).map_err(describe)?;
    let created = source::create(db, new, keys)
        .await
        .map_err(|err| match err {
            domain::Error::Conflict(message) => Failure::error(
                Exit::Conflict,
                format!(
                    "{message}; change it with `leadpipe source update --name {}` \
                     (only the options given change)",
                    name.trim()
                ),
            ),
            other => describe(other),
        })?;
    let view = SourceOut::from(created);
    match generated {
        // The secret is what a script needs (`SECRET=$(leadpipe source add
        // … --generate-secret)`): it alone goes to stdout.
        Some(secret) => {
            said("created", &view);
            eprintln!("{}", serde_json::to_string(&view)?);
            eprintln!("the generated secret below is shown only once:");
            println!("{secret}");
            Ok(())
        }
        None => show("created", &view),
    }
}

async fn update(
    db: &Store,
    args: UpdateArgs,
    outbound: &OutboundPolicy,
    keys: &Keyring,
) -> anyhow::Result<()> {
    let UpdateArgs {
        name,
        scheme,
        secrets,
        mut fields,
        reset,
    } = args;
    check_stdin_once(&secrets, &fields)?;
    let secrets = secrets.read()?;
    let pull_auth_secret = fields.pull_auth_secret()?;
    // The request body `PATCH /api/sources/{name}` takes: the options
    // given, and `null` for each field reset to its default.
    let mut body = fields.given()?;
    if let Some(both) = reset.iter().find(|field| body.contains_key(field.as_str())) {
        anyhow::bail!("--reset {both} and a new value for it: give one");
    }
    for field in reset {
        body.insert(field, Value::Null);
    }
    if let Some(scheme) = scheme {
        body.insert("scheme".into(), scheme.into());
    }
    if let Some(secrets) = secrets {
        body.insert("secrets".into(), secrets.into());
    }
    if let Some(secret) = pull_auth_secret {
        body.insert("pull_auth_secret".into(), secret.into());
    }
    if let Some(token) = fields.verify_token.take() {
        body.insert("verify_token".into(), token.into());
    }
    let patch: SourcePatch = serde_json::from_value(Value::Object(body))?;
    if patch.is_empty() {
        anyhow::bail!("nothing to change: give the options to change, or --reset FIELD");
    }
    let changed = source::update(db, &name, patch, &IfMatch::Any, outbound, keys)
        .await
        .map_err(|err| match err {
            domain::Error::NotFound => Failure::error(
                Exit::NotFound,
                format!("no source '{name}' (create one with `leadpipe source add`)"),
            ),
            other => describe(other),
        })?;
    show("updated", &SourceOut::from(changed))
}

/// What was done on stderr, and the source as it is now (no secret) on
/// stdout: one JSON object, as `source list -o json` prints it.
fn show(done: &str, view: &SourceOut) -> anyhow::Result<()> {
    said(done, view);
    println!("{}", serde_json::to_string(view)?);
    Ok(())
}

fn said(done: &str, view: &SourceOut) {
    eprintln!(
        "{done} source '{}' ({}); webhook URL path: /webhooks/{}",
        view.name, view.scheme, view.name
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn every_option() -> FieldArgs {
        let text = |s: &str| Some(s.to_owned());
        FieldArgs {
            tolerance_secs: Some(300),
            signature_header: text("x-sig"),
            event_id_header: text("x-id"),
            event_id_pointer: text("/id"),
            event_type_header: text("x-type"),
            event_type_pointer: text("/type"),
            allowed_event_types: vec!["lead.created".into()],
            record_pointer: text("/data"),
            source_ref_pointer: text("/id"),
            email_pointer: text("/email"),
            name_pointer: text("/name"),
            phone_pointer: text("/phone"),
            company_pointer: text("/company"),
            updated_at_pointer: text("/updated_at"),
            pull_url: text("https://api.example.com/leads"),
            pull_auth_header: text("authorization"),
            pull_auth_secret: text("kept out of the fields"),
            pull_auth_secret_file: None,
            pull_page_size: Some(100),
            cron: text("0 */5 * * * *"),
            expected_interval: text("2h"),
            events_pointer: text("/*"),
            verify_token: text("kept out of the fields too"),
        }
    }

    /// The options are the API's fields by name: every one is a field of
    /// both request bodies (which refuse unknown fields), and every one can
    /// be reset; the pull auth value travels apart.
    #[test]
    fn the_options_given_are_the_request_body_s_fields() {
        let given = every_option().given().unwrap();
        let mut names: Vec<&str> = given.keys().map(String::as_str).collect();
        let mut resettable = RESETTABLE.to_vec();
        names.sort_unstable();
        resettable.sort_unstable();
        assert_eq!(names, resettable);
        let patch: SourcePatch = serde_json::from_value(Value::Object(given.clone())).unwrap();
        assert_eq!(
            patch.pull_page_size,
            domain::field_presence::Patch::Value(100)
        );
        let mut create = given;
        create.insert("name".into(), "partner".into());
        create.insert("scheme".into(), "hmac-sha256".into());
        let config: SourceConfig = serde_json::from_value(Value::Object(create)).unwrap();
        assert_eq!(
            config.allowed_event_types,
            Some(vec!["lead.created".to_owned()])
        );
        assert_eq!(config.pull_auth_secret, None);
    }

    #[test]
    fn an_option_left_out_is_not_given() {
        let mut fields = every_option();
        fields.cron = None;
        fields.allowed_event_types.clear();
        let given = fields.given().unwrap();
        assert!(!given.contains_key("cron"));
        assert!(!given.contains_key("allowed_event_types"));
        assert_eq!(given["tolerance_secs"], 300);
    }
}

//! `leadpipe user …`: people who sign in to the page. A password comes from
//! an environment variable named by `--password-env`, or is asked for on
//! the terminal without echo; never from the command line, where `ps` and
//! shell history would show it.

use clap::Subcommand;
use clap::builder::TypedValueParser as _;
use domain::auth::Role;
use domain::store::Store;
use domain::users::{self, NewUser, Password, UserRecord};

use super::output::OutputArgs;
use crate::wire::users::UserListingOut;

/// The roles a user may have (intake tokens belong to a source).
const USER_ROLES: [Role; 3] = [Role::Sales, Role::Ops, Role::Admin];

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user who signs in with an email and a password.
    Add {
        /// How the user is named on leads and timelines.
        #[arg(long)]
        name: String,
        /// The address it signs in with (unique, whatever its case).
        #[arg(long)]
        email: String,
        /// What the user may do: `sales` (owns leads), `ops` or `admin`.
        #[arg(long, value_parser = super::one_of(USER_ROLES.map(Role::as_str)).try_map(|s| s.parse::<Role>()))]
        role: Role,
        /// Routing (sales only): the team whose rules send it leads.
        #[arg(long)]
        team: Option<String>,
        /// Read the password from this environment variable (its name, not
        /// the password); without it, the password is asked for.
        #[arg(long, value_name = "VAR")]
        password_env: Option<String>,
    },
    /// List users: id, name, email, role, team, state (never passwords).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Disable a user: it cannot sign in, its sessions end, its token is
    /// refused (by servers that remember it, after at most
    /// LEADPIPE_AUTH_CACHE_SECS).
    Disable {
        /// The user's id or email.
        user: String,
    },
    /// Set a user's password; its sessions end.
    ResetPassword {
        /// The user's id or email.
        user: String,
        /// Read the new password from this environment variable; without
        /// it, the password is asked for.
        #[arg(long, value_name = "VAR")]
        password_env: Option<String>,
    },
}

pub async fn run_user(db: &Store, command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Add {
            name,
            email,
            role,
            team,
            password_env,
        } => {
            let password = users::hash_password(read_password(password_env.as_deref())?)
                .await
                .map_err(super::describe)?;
            let added = users::add(
                db,
                NewUser {
                    name,
                    email,
                    role,
                    team,
                    password,
                },
            )
            .await
            .map_err(super::describe)?;
            println!(
                "added user {} '{}' <{}> with role {}",
                added.principal.id, added.principal.name, added.email, added.principal.role
            );
        }
        UserCommand::List { output } => {
            let rows: Vec<UserListingOut> = users::list(db)
                .await?
                .into_iter()
                .map(UserListingOut::from)
                .collect();
            output.print(
                &rows,
                &["id", "name", "email", "role", "team", "state", "created_at"],
            )?;
        }
        UserCommand::Disable { user } => {
            let user = find(db, &user).await?;
            let txn = db.begin_write().await?;
            let user = users::disable(&*txn, user.principal.id)
                .await
                .map_err(super::describe_missing("user"))?;
            txn.commit().await?;
            println!(
                "disabled user {} <{}>; its sessions ended",
                user.principal.id, user.email
            );
        }
        UserCommand::ResetPassword { user, password_env } => {
            let user = find(db, &user).await?;
            let password = users::hash_password(read_password(password_env.as_deref())?)
                .await
                .map_err(super::describe)?;
            let txn = db.begin_write().await?;
            users::set_password(&*txn, user.principal.id, password)
                .await
                .map_err(super::describe_missing("user"))?;
            txn.commit().await?;
            println!(
                "set the password of user {} <{}>; its sessions ended",
                user.principal.id, user.email
            );
        }
    }
    Ok(())
}

/// The user an id or an email names.
async fn find(db: &Store, user: &str) -> anyhow::Result<UserRecord> {
    let found = match user.trim().parse::<i64>() {
        Ok(id) => users::find(db, id).await,
        Err(_) => users::find_by_email(db, user).await,
    };
    found.map_err(|e| match e {
        domain::Error::NotFound => {
            super::Failure::error(super::Exit::NotFound, format!("no user '{user}'"))
        }
        other => super::describe(other),
    })
}

/// The password from the environment variable `var`, or asked for twice on
/// the terminal.
fn read_password(var: Option<&str>) -> anyhow::Result<Password> {
    let text = match var {
        Some(var) => std::env::var(var).map_err(|_| {
            super::Failure::error(
                super::Exit::Usage,
                format!("--password-env {var}: the environment variable is not set"),
            )
        })?,
        None => {
            let ask = |prompt: &str| {
                rpassword::prompt_password(prompt).map_err(|e| {
                    super::Failure::error(
                        super::Exit::Usage,
                        format!(
                            "cannot ask for the password ({e}); give --password-env VAR instead"
                        ),
                    )
                })
            };
            let first = ask("password: ")?;
            if ask("again: ")? != first {
                return Err(super::Failure::error(
                    super::Exit::Usage,
                    "the passwords differ",
                ));
            }
            first
        }
    };
    Password::new(text).map_err(super::describe)
}

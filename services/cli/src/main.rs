//! `actiond`: one binary, one subcommand per role, plus administration, the break-glass CLI,
//! a small client and `actiond dev`. Errors print as one readable line on stderr; the exit code
//! says what kind of failure it was ([`exit`]).

mod admin;
mod args;
mod audit;
mod client;
mod dev;
mod docs;
mod exit;
mod output;
mod seal_state;

use clap::{Parser, Subcommand};

/// `actiond version` and `--version`: the package version and the git commit built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ACTIOND_GIT_COMMIT"),
    ")"
);

/// actiond — an approval gateway for AI agent actions.
#[derive(Debug, Parser)]
#[command(name = "actiond", version = VERSION, about, propagate_version = true)]
struct Cli {
    /// Log lines on stderr: `text` or `json` (one object per line). Errors that end the
    /// process are written the same way.
    #[arg(
        long,
        global = true,
        env = "ACTIOND_LOG_FORMAT",
        default_value = "text",
        value_parser = ["text", "json"]
    )]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent-facing API (REST + MCP).
    Api(actiond_api::ApiArgs),
    /// Run the policy worker; `actiond policy test` replays history through a candidate document,
    /// `actiond policy shadow-report` shows what a shadow document decided on live traffic.
    Policy(PolicyCmd),
    /// Run the executor (the only holder of provider credentials).
    Executor(actiond_executor::ExecutorArgs),
    /// Run the approval web app (OIDC SSO; a loopback-only dev login for `actiond dev`).
    Web(actiond_web::WebArgs),
    /// Bridge MCP over stdio to the API's /mcp endpoint (for desktop agents).
    McpStdio(actiond_api::mcp::StdioArgs),
    /// Apply the embedded database migrations (idempotent; safe with concurrent replicas).
    Migrate(admin::DbArgs),
    /// Generate an Ed25519 grant key pair.
    Keygen(admin::KeygenArgs),
    /// Tenant documents: apply, diff, show, history, validate; shadow and promote a candidate.
    #[command(subcommand)]
    Tenant(admin::TenantCmd),
    /// Agents and their tokens: create, list, freeze, unfreeze, revoke.
    #[command(subcommand)]
    Agent(admin::AgentCmd),
    /// Break-glass operator approvals: list, show, approve, deny, amend.
    #[command(subcommand)]
    Approvals(admin::ApprovalsCmd),
    /// Propose an action (small client for the REST API).
    Propose(client::ProposeArgs),
    /// Show a proposal's status (small client for the REST API).
    Status(client::StatusArgs),
    /// Sealed audit trail: keygen, seal, verify, verify-passkeys, export; retention purge.
    #[command(subcommand)]
    Audit(audit::AuditCmd),
    /// Run everything on this machine: a throwaway Postgres, keys, a demo tenant, an agent token.
    Dev(dev::DevArgs),
    /// Print the version and the git commit this binary was built from.
    Version,
    /// Print a shell completion script: `source <(actiond completion bash)`, `actiond
    /// completion zsh > "${fpath[1]}/_actiond"`, `actiond completion fish | source`.
    Completion {
        /// The shell: bash, zsh, fish (also elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Documentation rendered from this binary (for the repository's docs/; hidden).
    #[command(subcommand, hide = true)]
    Docs(docs::DocsCmd),
}

/// `actiond policy [test …]`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct PolicyCmd {
    #[command(subcommand)]
    sub: Option<admin::PolicySub>,
    #[command(flatten)]
    run: Option<actiond_policy::PolicyArgs>,
}

fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return exit::usage_error(e, &<Cli as clap::CommandFactory>::command()),
    };
    if matches!(cli.command, Command::Version) {
        actiond_runtime::say(&format!("actiond {VERSION}"));
        return std::process::ExitCode::SUCCESS;
    }
    if let Command::Completion { shell } = &cli.command {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        let mut out = Vec::new();
        clap_complete::generate(*shell, &mut cmd, "actiond", &mut out);
        actiond_runtime::say(String::from_utf8_lossy(&out).trim_end());
        return std::process::ExitCode::SUCCESS;
    }
    if let Command::Docs(d) = &cli.command {
        docs::run(d, &<Cli as clap::CommandFactory>::command());
        return std::process::ExitCode::SUCCESS;
    }
    let quiet_logs = matches!(
        cli.command,
        Command::Tenant(_)
            | Command::Agent(_)
            | Command::Approvals(_)
            | Command::Propose(_)
            | Command::Status(_)
            | Command::Keygen(_)
            | Command::McpStdio(_)
    );
    let format = actiond_runtime::LogFormat::parse(&cli.log_format)
        .unwrap_or(actiond_runtime::LogFormat::Text);
    let json = format == actiond_runtime::LogFormat::Json;
    if !quiet_logs || json || std::env::var_os("RUST_LOG").is_some() {
        // Administration commands print their results; their logs stay at warnings.
        let default = if quiet_logs {
            "warn"
        } else {
            actiond_runtime::DEFAULT_LOG_FILTER
        };
        actiond_runtime::init_tracing_as(format, default);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            actiond_runtime::tell(&format!("actiond: error: cannot start the runtime: {e}"));
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Api(a) => actiond_api::run(a).await,
            Command::Policy(PolicyCmd { sub: Some(s), .. }) => admin::policy(s).await,
            Command::Policy(PolicyCmd { run: Some(a), .. }) => actiond_policy::run(a).await,
            Command::Policy(PolicyCmd { .. }) => Err(exit::invalid(
                "actiond policy needs DATABASE_URL (see actiond policy --help)",
            )),
            Command::Executor(a) => actiond_executor::run(a).await,
            Command::Web(a) => actiond_web::run(a).await,
            Command::McpStdio(a) => actiond_api::mcp::run_stdio(a).await,
            Command::Migrate(a) => admin::migrate(a).await,
            Command::Keygen(a) => admin::keygen(a),
            Command::Tenant(c) => admin::tenant(c).await,
            Command::Agent(c) => admin::agent(c).await,
            Command::Approvals(c) => admin::approvals(c).await,
            Command::Propose(a) => client::propose(a).await,
            Command::Status(a) => client::status(a).await,
            Command::Audit(c) => audit::audit(c).await,
            Command::Dev(a) => dev::run(a).await,
            Command::Version | Command::Docs(_) | Command::Completion { .. } => Ok(()),
        }
    });
    // Do not wait for tasks still running (a connection attempt, a blocking lookup): the role
    // has drained; waiting here would also leave a second SIGTERM unheard.
    rt.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => exit::report(&e, json),
    }
}

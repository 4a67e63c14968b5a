//! `weft`: the operator's command. The command line is `weft_controller::cli`, the logic the
//! `weft_controller::cmd` modules; this file parses, sets up logging and maps outcomes to the
//! exit status table (`weft_controller::cli::EXIT_CODES`).

use clap::{CommandFactory, Parser};
use weft_controller::cli::{Cli, Command, NicArg, ShowCommand, TestbedCommand};
use weft_controller::cmd::{self, Outcome};
use weft_controller::logging::{self, LogLevel};
use weft_controller::outln;

/// Usage errors (sysexits' EX_USAGE), apart from 2 (invalid intent).
const EXIT_USAGE: i32 = 64;

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn block_on<F: std::future::Future<Output = anyhow::Result<Outcome>>>(
    f: F,
) -> anyhow::Result<Outcome> {
    runtime()?.block_on(f)
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version are not errors.
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let default = match cli.command {
        Command::Run { .. } => LogLevel::Info,
        _ => LogLevel::Warn,
    };
    logging::init(cli.log.log_level, cli.log.log_format, default);
    let result = dispatch(cli.command);
    match result {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            // One line, the causes after colons; never a backtrace.
            weft_controller::errln!("weft: {e:#}");
            std::process::exit(1);
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Validate { files, output } => cmd::validate::run(&files, output),
        Command::Show {
            what: None,
            file,
            output,
            switches,
        } => cmd::show::run(file.as_deref().unwrap_or("-"), output, switches),
        Command::Show {
            what:
                Some(ShowCommand::Queues {
                    file,
                    targets,
                    nonzero,
                    output,
                }),
            ..
        } => block_on(cmd::counters::queues(&file, &targets, nonzero, output)),
        Command::Show {
            what:
                Some(ShowCommand::Pfcwd {
                    file,
                    targets,
                    output,
                }),
            ..
        } => block_on(cmd::counters::pfcwd(&file, &targets, output)),
        Command::Plan {
            file,
            down,
            offline,
            verbose,
            output,
            out,
            detailed_exitcode,
            targets,
        } => block_on(cmd::plan::run_plan(
            &file,
            cmd::plan::PlanArgs {
                down,
                offline,
                output,
                verbose,
                out,
                detailed_exitcode,
                targets,
            },
        )),
        Command::Apply {
            file,
            down,
            dry_run,
            no_wait,
            timeout,
            retry,
            output,
            targets,
            parallelism,
            canary,
            steal,
        } => block_on(cmd::plan::run_apply(
            &file,
            cmd::plan::ApplyArgs {
                down,
                dry_run,
                timeout: (!no_wait).then_some(timeout),
                retry_for: retry,
                output,
                targets,
                parallelism,
                canary,
                steal,
            },
        )),
        Command::Run {
            file,
            resync,
            timeout,
            events_log,
            status_file,
            parallelism,
            steal,
            ha,
            id,
            ha_ttl,
            metrics,
        } => block_on(cmd::run::run(
            &file,
            cmd::run::RunArgs {
                resync,
                timeout,
                events_log,
                status_file,
                parallelism,
                steal,
                ha: ha.map(|h| (h, id.unwrap_or_default(), ha_ttl)),
                metrics,
            },
        )),
        Command::Status {
            file,
            status_file,
            ha,
            output,
        } => block_on(cmd::run::status(&file, status_file, ha, output)),
        Command::Top {
            file,
            once,
            interval,
            sort,
            filter,
            rows,
            output,
        } => block_on(cmd::top::run(
            &file,
            once || output == cmd::OutputFormat::Json,
            interval,
            match sort {
                weft_controller::cli::TopSort::Util => cmd::top::Sort::Utilisation,
                weft_controller::cli::TopSort::Packets => cmd::top::Sort::Packets,
            },
            filter,
            rows,
            output,
        )),
        Command::Trace {
            file,
            src,
            dst,
            flow,
            qp,
            since,
            output,
        } => {
            let mut filter = flow.unwrap_or_default();
            filter.qp = qp;
            block_on(cmd::trace::run(&file, &src, &dst, filter, since, output))
        }
        Command::Doctor {
            file,
            targets,
            output,
        } => block_on(cmd::doctor::run(&file, &targets, output)),
        Command::Diagnose {
            file,
            window,
            interval,
            record,
            replay,
            all,
            output,
        } => block_on(cmd::diagnose::run(
            &file,
            cmd::diagnose::DiagnoseArgs {
                window,
                interval,
                record,
                replay,
                all,
                output,
            },
        )),
        Command::Graph {
            file,
            format,
            out,
            offline,
            hosts,
        } => block_on(cmd::graph::run(&file, format, out, offline, hosts)),
        Command::Schema => {
            outln!("{}", serde_json::to_string_pretty(weft_topology::schema())?);
            Ok(Outcome::Ok)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "weft",
                &mut weft_controller::out::stdout(),
            );
            Ok(Outcome::Ok)
        }
        Command::Manpages { dir } => {
            let n = cmd::manpages(&Cli::command(), &dir)?;
            outln!("{n} man pages in {}", dir.display());
            Ok(Outcome::Ok)
        }
        Command::Testbed { command, state_dir } => match command {
            TestbedCommand::Up {
                file,
                db_only,
                acl,
                tls,
                plugin_args,
            } => cmd::testbed::up(&file, state_dir, db_only, acl, tls, plugin_args),
            TestbedCommand::Down { fabric } => cmd::testbed::down(&fabric, state_dir),
            TestbedCommand::Fault {
                fabric,
                kind,
                targets,
                priority,
                percent,
                rate,
                senders,
                pps,
                line_pps,
                delay,
                output,
            } => cmd::testbed::fault(
                &fabric,
                state_dir,
                kind,
                &targets,
                &weft_testbed::fault::Params {
                    priority,
                    percent,
                    rate_pps: rate,
                    senders,
                    pps,
                    line_pps,
                    delay,
                },
                output,
            ),
            TestbedCommand::Status { fabric, output } => {
                cmd::testbed::status(&fabric, state_dir, output)
            }
            TestbedCommand::Link {
                fabric,
                port,
                action,
                count,
                interval,
            } => cmd::testbed::link(&fabric, state_dir, &port, action, count, interval),
            TestbedCommand::Kill {
                fabric,
                switch,
                part,
            } => cmd::testbed::kill(&fabric, state_dir, &switch, part),
            TestbedCommand::Restart {
                fabric,
                switch,
                part,
            } => cmd::testbed::restart(&fabric, state_dir, &switch, part),
            TestbedCommand::PrometheusConfig {
                fabric,
                out,
                controller,
                interval,
            } => cmd::testbed::prometheus_config(&fabric, state_dir, out, &controller, interval),
            TestbedCommand::Ping { fabric, output } => {
                cmd::testbed::ping(&fabric, state_dir, output)
            }
            TestbedCommand::Spread { file, src, dst } => {
                cmd::testbed::spread(&file, state_dir, &src, &dst)
            }
            TestbedCommand::Workload {
                file,
                collectives,
                ranks,
                size,
                warmup,
                iterations,
                qps,
                mtu,
                rate_pps,
                port_rate,
                nic,
                modes,
                down,
                flowlet_gap,
                baseline,
                threshold,
                timeout,
                output,
            } => cmd::workload::run(
                &file,
                state_dir,
                &cmd::workload::WorkloadArgs {
                    collectives,
                    ranks,
                    size,
                    warmup,
                    iterations,
                    qps,
                    mtu,
                    rate_pps,
                    port_rate,
                    nic: match nic {
                        NicArg::Intent => weft_testbed::workload::Nic::Intent,
                        NicArg::Ooo => weft_testbed::workload::Nic::OutOfOrder,
                        NicArg::GoBackN => weft_testbed::workload::Nic::GoBackN,
                    },
                    modes,
                    down,
                    flowlet_gap,
                    baseline,
                    threshold,
                    timeout,
                },
                output,
            ),
        },
        Command::Simulate {
            file,
            collective,
            modes,
            down,
            random_down,
            seed,
            size,
            qps,
            mtu,
            class,
            ranks,
            output,
        } => cmd::simulate::parse_modes(&modes).and_then(|modes| {
            cmd::simulate::run(
                &file,
                &cmd::simulate::SimulateArgs {
                    collective,
                    modes,
                    down,
                    random_down,
                    seed,
                    size,
                    lanes: qps,
                    mtu,
                    class,
                    ranks,
                },
                output,
            )
        }),
    }
}

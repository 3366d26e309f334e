package dev.scorch.jobs;

import dev.scorch.jobs.cli.BenchCommand;
import dev.scorch.jobs.cli.EvalCommand;
import dev.scorch.jobs.cli.GenerateCommand;
import dev.scorch.jobs.cli.GpuBudgetCommand;
import dev.scorch.jobs.cli.InspectCommand;
import dev.scorch.jobs.cli.LmEvalCommand;
import dev.scorch.jobs.cli.MakeDemoModelCommand;
import dev.scorch.jobs.cli.ScoreCommand;
import dev.scorch.jobs.cli.SqlCommand;
import dev.scorch.jobs.cli.TokenizeCommand;
import dev.scorch.udfs.model.RemoteCheckpoint;
import java.nio.file.Path;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code scorch} command line: one subcommand per job. */
@Command(
        name = "scorch",
        mixinStandardHelpOptions = true,
        version = "scorch 0.1.0",
        description = "LLM batch scoring and generation inside Apache Spark (DeepSeek-V3 / Kimi K2 family).",
        subcommands = {
            ScoreCommand.class,
            GenerateCommand.class,
            EvalCommand.class,
            LmEvalCommand.class,
            SqlCommand.class,
            TokenizeCommand.class,
            MakeDemoModelCommand.class,
            InspectCommand.class,
            GpuBudgetCommand.class,
            BenchCommand.class,
            CommandLine.HelpCommand.class
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch make-demo-model --out models/demo-small --preset small",
            "  bin/scorch inspect --model models/demo-small",
            "  bin/scorch bench --model models/demo-small --batch 8 --seq 256 --threads 2",
            "  bin/scorch <command> --help"
        })
public final class ScorchCli implements Runnable {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new ScorchCli());
        // Every path option (--model, --tokenizer, --input, ...) takes a file: URI as well as a plain path.
        cl.registerConverter(Path.class, RemoteCheckpoint::localPath);
        cl.setExecutionExceptionHandler((ex, cmd, parsed) -> {
            cmd.getErr().println("scorch " + cmd.getCommandName() + ": " + ex.getMessage());
            return 2;
        });
        return cl;
    }

    /** Runs one subcommand with its arguments (the jobs' spark-submit entry points); returns the exit code. */
    public static int run(String subcommand, String[] args) {
        String[] all = new String[args.length + 1];
        all[0] = subcommand;
        System.arraycopy(args, 0, all, 1, args.length);
        return commandLine().execute(all);
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }
}

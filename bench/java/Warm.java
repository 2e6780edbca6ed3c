// Runs one of Kafka's tools twice in one JVM for scripts/bench: a warm-up invocation, then the measured one,
// so the measured run sees a JVM whose JIT has already compiled the client's hot paths.
//
//   Warm MAIN_CLASS WARM-UP ARGS... -- MEASURED ARGS...
//
// Both invocations call MAIN_CLASS.main with the arguments a user passes to its shell script (e.g.
// kafka-producer-perf-test.sh is kafka-run-class.sh org.apache.kafka.tools.ProducerPerformance "$@").
// The warm-up's stdout goes to stderr, so stdout carries only the measured run's output; the line
// "WARM-UP DONE" on stderr separates them. A tool that ends by calling Kafka's Exit.exit (EndToEndLatency)
// has that call turned into a return for the warm-up when its status is 0; any other status ends the JVM
// with it, and the measured run exits as the tool does.
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;

import org.apache.kafka.common.utils.Exit;

public class Warm {
    /** Thrown by the warm-up's exit procedure to unwind the tool's main without ending the JVM. */
    private static final class WarmUpExit extends RuntimeException {
        WarmUpExit() {
            super(null, null, false, false);
        }
    }

    public static void main(String[] args) throws Exception {
        int sep = Arrays.asList(args).indexOf("--");
        if (args.length < 1 || sep < 1) {
            System.err.println("usage: Warm MAIN_CLASS WARM-UP ARGS... -- MEASURED ARGS...");
            System.exit(2);
        }
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        String[] warmUp = Arrays.copyOfRange(args, 1, sep);
        String[] measured = Arrays.copyOfRange(args, sep + 1, args.length);

        PrintStream out = System.out;
        System.setOut(System.err);
        Exit.setExitProcedure((status, message) -> {
            if (status != 0) {
                System.err.println("Warm: the warm-up exited with status " + status
                        + (message == null ? "" : ": " + message));
                Runtime.getRuntime().halt(status);
            }
            throw new WarmUpExit();
        });
        try {
            main.invoke(null, (Object) warmUp);
        } catch (InvocationTargetException e) {
            if (!(e.getCause() instanceof WarmUpExit)) {
                throw e;
            }
        } finally {
            // the JVM's own exit again (Exit.resetExitProcedure would make a later Exit.exit throw)
            Exit.setExitProcedure((status, message) -> System.exit(status));
            System.out.flush();
            System.setOut(out);
        }
        System.err.println("WARM-UP DONE");
        main.invoke(null, (Object) measured);
    }
}

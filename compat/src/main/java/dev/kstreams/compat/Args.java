package dev.kstreams.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Command-line options: positionals and repeatable {@code --name value} pairs. */
final class Args {
    private final List<String> positionals = new ArrayList<>();
    private final Map<String, List<String>> options = new HashMap<>();

    static Args parse(String[] argv) throws HarnessException {
        Args args = new Args();
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].startsWith("--")) {
                if (i + 1 >= argv.length) {
                    throw new HarnessException("option " + argv[i] + " needs a value");
                }
                args.options.computeIfAbsent(argv[i].substring(2), k -> new ArrayList<>()).add(argv[++i]);
            } else {
                args.positionals.add(argv[i]);
            }
        }
        return args;
    }

    String positional(int index, String what) throws HarnessException {
        if (index >= positionals.size()) {
            throw new HarnessException("missing " + what);
        }
        return positionals.get(index);
    }

    String required(String name) throws HarnessException {
        List<String> values = options.get(name);
        if (values == null) {
            throw new HarnessException("missing option --" + name);
        }
        return values.get(values.size() - 1);
    }

    String optional(String name, String fallback) {
        List<String> values = options.get(name);
        return values == null ? fallback : values.get(values.size() - 1);
    }

    List<String> all(String name) {
        return options.getOrDefault(name, List.of());
    }
}

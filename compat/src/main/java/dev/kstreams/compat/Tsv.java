package dev.kstreams.compat;

/**
 * The record files shared with xtask: one record a line, fields separated by
 * tabs. Inside a field a backslash, tab, newline and carriage return are
 * written as {@code \\ \t \n \r}; a null key or value is {@code \N}.
 *
 * <p>Input files have {@code partition timestamp key value}; dumps have
 * {@code partition offset timestamp key value}.
 */
final class Tsv {
    static final String NULL = "\\N";

    private Tsv() {}

    static String escape(String field) {
        if (field == null) {
            return NULL;
        }
        StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            switch (c) {
                case '\\' -> out.append("\\\\");
                case '\t' -> out.append("\\t");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                default -> out.append(c);
            }
        }
        return out.toString();
    }

    static String unescape(String field) throws HarnessException {
        if (field.equals(NULL)) {
            return null;
        }
        StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (++i == field.length()) {
                throw new HarnessException("dangling backslash in field: " + field);
            }
            switch (field.charAt(i)) {
                case '\\' -> out.append('\\');
                case 't' -> out.append('\t');
                case 'n' -> out.append('\n');
                case 'r' -> out.append('\r');
                default -> throw new HarnessException("bad escape in field: " + field);
            }
        }
        return out.toString();
    }
}

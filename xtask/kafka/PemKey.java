// Writes the private key of one entry of a PKCS12 store as PEM (PKCS#8),
// which keytool cannot export. The test cluster's mutual-TLS client key:
// `cargo xtask kafka start` runs it with the JDK's source launcher.
//
// Usage: java PemKey.java <store.p12> <store password> <alias> <out.pem>

import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.Key;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.util.Base64;

public class PemKey {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: java PemKey.java <store.p12> <password> <alias> <out.pem>");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            store.load(in, password);
        }
        Key key = store.getKey(args[2], password);
        if (!(key instanceof PrivateKey)) {
            System.err.println(args[0] + " has no private key under the alias " + args[2]);
            System.exit(1);
        }
        // getEncoded() of a private key is its PKCS#8 PrivateKeyInfo.
        String body = Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII))
            .encodeToString(key.getEncoded());
        String pem = "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n";
        Path out = Path.of(args[3]);
        Files.writeString(out, pem, StandardCharsets.US_ASCII);
    }
}

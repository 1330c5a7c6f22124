// The JDK's gzip reader as Kafka's broker uses it (GzipCompression.wrapForInput: GZIPInputStream over the
// payload's bytes with an 8 KiB buffer), run over test cases from stdin.
//
// stdin: repeated [int32 big-endian length][payload bytes]; a length of -1 ends the input.
// stdout: one line per case: "OK <decompressed length> <CRC-32 of the decompressed bytes, hex>" or
// "ERR <exception class>".
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.CRC32;
import java.util.zip.GZIPInputStream;

public final class GzipOracle {
    public static void main(String[] args) throws IOException {
        DataInputStream cases = new DataInputStream(new java.io.BufferedInputStream(System.in, 1 << 16));
        StringBuilder out = new StringBuilder();
        byte[] chunk = new byte[16 * 1024];
        while (true) {
            int len = cases.readInt();
            if (len < 0) break;
            byte[] payload = new byte[len];
            cases.readFully(payload);
            try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(payload), 8 * 1024)) {
                CRC32 crc = new CRC32();
                long total = 0;
                int n;
                while ((n = in.read(chunk, 0, chunk.length)) != -1) {
                    crc.update(chunk, 0, n);
                    total += n;
                }
                out.append("OK ").append(total).append(' ').append(Long.toHexString(crc.getValue())).append('\n');
            } catch (IOException | RuntimeException e) {
                out.append("ERR ").append(e.getClass().getSimpleName()).append('\n');
            }
        }
        System.out.print(out);
        System.out.flush();
    }
}

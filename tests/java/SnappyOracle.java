// snappy-java's reader as Kafka's broker uses it (SnappyCompression.wrapForInput: a SnappyInputStream over
// the payload's bytes, behind Kafka's ChunkedBytesStream with a 2 KiB buffer, read to EOF in reads of twice
// the payload's length as ClientTelemetryUtils.decompress reads it), run over test cases from stdin.
// SnappyInputStream is the real one (Debian's libsnappy-java); Kafka's ChunkedBytesStream is not on this
// machine, so Buffered below restates the part of its read contract that can change a result: reads of at
// least the buffer's size go straight to the source, smaller ones are served from a 2 KiB fill, and a read
// that got some bytes but not all it asked for returns once the source's available() is 0.
//
// stdin: repeated [int32 big-endian length][payload bytes]; a length of -1 ends the input.
// stdout: one line per case: "OK <decompressed length> <CRC-32 of the decompressed bytes, hex>" or
// "ERR <throwable class>" (snappy-java also throws SnappyError, a java.lang.Error).
import java.io.ByteArrayInputStream;
import java.io.FilterInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.CRC32;
import org.xerial.snappy.SnappyInputStream;

public final class SnappyOracle {
    public static void main(String[] args) throws IOException {
        DataInputStream cases = new DataInputStream(new java.io.BufferedInputStream(System.in, 1 << 16));
        StringBuilder out = new StringBuilder();
        while (true) {
            int len = cases.readInt();
            if (len < 0) break;
            byte[] payload = new byte[len];
            cases.readFully(payload);
            try (InputStream in = new Buffered(new SnappyInputStream(new ByteArrayInputStream(payload)), 2048)) {
                byte[] chunk = new byte[Math.max(1, payload.length * 2)];   // ClientTelemetryUtils' read size
                CRC32 crc = new CRC32();
                long total = 0;
                int n;
                while ((n = in.read(chunk, 0, chunk.length)) != -1) {
                    crc.update(chunk, 0, n);
                    total += n;
                }
                out.append("OK ").append(total).append(' ').append(Long.toHexString(crc.getValue())).append('\n');
            } catch (Throwable e) {
                out.append("ERR ").append(e.getClass().getSimpleName()).append('\n');
            }
        }
        System.out.print(out);
        System.out.flush();
    }

    static final class Buffered extends FilterInputStream {
        private final byte[] buf;
        private int pos, count;

        Buffered(InputStream in, int size) {
            super(in);
            buf = new byte[size];
        }

        private int readOnce(byte[] b, int off, int len) throws IOException {
            if (count - pos <= 0) {
                if (len >= buf.length) return in.read(b, off, len);
                pos = 0;
                count = 0;
                int n = in.read(buf, 0, buf.length);
                if (n > 0) count = n;
                if (count <= 0) return -1;
            }
            int cnt = Math.min(count - pos, len);
            System.arraycopy(buf, pos, b, off, cnt);
            pos += cnt;
            return cnt;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) return 0;
            int n = 0;
            while (true) {
                int r = readOnce(b, off + n, len - n);
                if (r <= 0) return n == 0 ? r : n;
                n += r;
                if (n >= len || in.available() <= 0) return n;
            }
        }
    }
}

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;

/**
 * Oracle for kip714's Java-order emulation: replays subscription histories the way an Apache Kafka
 * broker's ClientMetricsManager stores them and prints, for each query, the requested metrics in
 * HashSet order and the SubscriptionId.
 *
 * Input, one command per line, tokens separated by single spaces. A string token is "x" followed by
 * its UTF-16 code units as 4 hex digits each ("x" alone is the empty string), so any Java string,
 * lone surrogates included, survives the trip.
 *   N                                  start a new case (empty map)
 *   P name intervalMs k m1 .. mk       subscriptionMap.put(name, info(new HashSet<>(List.of(m1..mk)), intervalMs))
 *   R name                             subscriptionMap.remove(name)
 *   Q msbHex lsbHex k n1 .. nk         resolve for a client whose matching subscriptions are n1..nk
 *                                      (k = -1: every subscription matches)
 * Output, one line per Q:
 *   subscriptionId intervalMs count m1 .. mcount keyCount k1 .. kkeyCount
 * with the metrics in the result set's iteration order and the map's keys in its iteration order.
 */
public final class SubscriptionOrder {

    private record Info(String name, Set<String> metrics, int intervalMs) {}

    private static String decode(String token) {
        int units = (token.length() - 1) / 4;
        char[] chars = new char[units];
        for (int i = 0; i < units; i++) {
            chars[i] = (char) Integer.parseInt(token.substring(1 + 4 * i, 5 + 4 * i), 16);
        }
        return new String(chars);
    }

    private static void encode(StringBuilder out, String s) {
        out.append(' ').append('x');
        for (int i = 0; i < s.length(); i++) {
            String hex = Integer.toHexString(s.charAt(i));
            for (int pad = hex.length(); pad < 4; pad++) {
                out.append('0');
            }
            out.append(hex);
        }
    }

    private static String query(ConcurrentHashMap<String, Info> subscriptions, String[] t) {
        long msb = Long.parseUnsignedLong(t[1], 16);
        long lsb = Long.parseUnsignedLong(t[2], 16);
        int k = Integer.parseInt(t[3]);
        Set<String> matching = null;
        if (k >= 0) {
            matching = new HashSet<>();
            for (int i = 0; i < k; i++) {
                matching.add(decode(t[4 + i]));
            }
        }
        // ClientMetricsManager.createClientInstance: union in map order, min interval, "*" collapses
        Set<String> requested = new HashSet<>();
        int intervalMs = 300000;
        boolean all = false;
        for (Info info : subscriptions.values()) {
            if (matching != null && !matching.contains(info.name())) {
                continue;
            }
            if (info.metrics().contains("*")) {
                all = true;
            }
            requested.addAll(info.metrics());
            intervalMs = Math.min(intervalMs, info.intervalMs());
        }
        if (all) {
            requested.clear();
            requested.add("*");
        }
        // computeSubscriptionId: CRC32C(toString + interval) ^ Uuid.hashCode()
        byte[] bytes = (requested.toString() + intervalMs).getBytes(StandardCharsets.UTF_8);
        CRC32C crc = new CRC32C();
        crc.update(bytes, 0, bytes.length);
        long x = msb ^ lsb;
        int uuidHash = (int) (x >> 32) ^ (int) x;
        int id = (int) crc.getValue() ^ uuidHash;

        StringBuilder out = new StringBuilder();
        out.append(id).append(' ').append(intervalMs).append(' ').append(requested.size());
        for (String m : requested) {
            encode(out, m);
        }
        out.append(' ').append(subscriptions.size());
        for (String key : subscriptions.keySet()) {
            encode(out, key);
        }
        return out.toString();
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintWriter out = new PrintWriter(new BufferedWriter(
                new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16));
        ConcurrentHashMap<String, Info> subscriptions = new ConcurrentHashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] t = line.split(" ");
            switch (t[0]) {
                case "N" -> subscriptions = new ConcurrentHashMap<>();
                case "P" -> {
                    String name = decode(t[1]);
                    int intervalMs = Integer.parseInt(t[2]);
                    int k = Integer.parseInt(t[3]);
                    List<String> metrics = new ArrayList<>(k);
                    for (int i = 0; i < k; i++) {
                        metrics.add(decode(t[4 + i]));
                    }
                    subscriptions.put(name, new Info(name, new HashSet<>(metrics), intervalMs));
                }
                case "R" -> subscriptions.remove(decode(t[1]));
                case "Q" -> out.println(query(subscriptions, t));
                default -> throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        out.flush();
    }
}

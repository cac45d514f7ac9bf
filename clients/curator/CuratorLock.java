// lockcheck adapter for Apache Curator's InterProcessMutex (docs/clients.md,
// client.md v1). Curator's mutex is ZooKeeper's lock recipe: an ephemeral
// sequential znode under the lock's path, the lowest holds. The znode's sequence
// number is a fencing token; the session timeout is the lease.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    /** The mutex, with the path of the znode it holds (protected in Curator). */
    static class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    static final ObjectMapper JSON = new ObjectMapper();
    static Mutex mutex;
    static long leaseMs;

    static ObjectNode handle(JsonNode req) throws Exception {
        ObjectNode reply = JSON.createObjectNode();
        String op = req.get("op").asText();
        switch (op) {
            case "init": {
                List<String> endpoints = new ArrayList<>();
                req.get("endpoints").forEach(e -> endpoints.add(e.asText()));
                leaseMs = req.get("lease_ms").asLong();
                CuratorFramework client = CuratorFrameworkFactory.newClient(
                        String.join(",", endpoints), (int) leaseMs, 5000, new RetryOneTime(100));
                client.start();
                if (!client.blockUntilConnected(10, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("no connection to ZooKeeper within 10 s");
                }
                mutex = new Mutex(client, "/lockcheck-curator/" + req.get("lock").asText());
                String version = CuratorFramework.class.getPackage().getImplementationVersion();
                reply.put("type", "ok");
                reply.put("library", "Apache Curator " + (version == null ? "5.4.0" : version));
                reply.putArray("ops").add("held");
                return reply;
            }
            case "acquire":
                if (mutex.acquire(req.get("timeout_ms").asLong(), TimeUnit.MILLISECONDS)) {
                    String path = mutex.lockPath();
                    reply.put("type", "ok");
                    // The znode's name ends in its 10-digit sequence number.
                    reply.put("token", Long.parseLong(path.substring(path.length() - 10)));
                    reply.put("lease_ms", leaseMs);
                } else {
                    reply.put("type", "fail");
                    reply.put("error", "held by another client");
                }
                return reply;
            case "release":
                try {
                    mutex.release();
                    reply.put("type", "ok");
                } catch (IllegalMonitorStateException e) {
                    reply.put("type", "fail");
                    reply.put("error", "not-held: " + e.getMessage());
                }
                return reply;
            case "held":
                // What Curator believes: its own record, not the znode.
                reply.put("type", "ok");
                reply.put("held", mutex.isAcquiredInThisProcess());
                return reply;
            default:
                reply.put("type", "fail");
                reply.put("error", "unknown op " + op);
                return reply;
        }
    }

    public static void main(String[] args) throws Exception {
        // Replies only on stdout; the libraries' logging goes to stderr.
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode req = JSON.readTree(line);
            ObjectNode reply;
            try {
                reply = handle(req);
            } catch (Exception e) {
                // A request may have reached ZooKeeper before the connection failed.
                e.printStackTrace();
                reply = JSON.createObjectNode();
                reply.put("type", "info");
                reply.put("error", e.toString());
            }
            reply.set("id", req.get("id"));
            out.println(JSON.writeValueAsString(reply));
        }
        System.exit(0);
    }
}

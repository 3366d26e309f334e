package dev.scorch.jobs.cluster;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A running driver's monitoring REST API (its web UI's /api/v1): which stage runs, which executor runs which task.
 * Every call answers empty while the driver is not (or no longer) up.
 */
final class DriverRest {
    private final String base;
    private final HttpClient http =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private final ObjectMapper json = new ObjectMapper();
    private String appId;

    DriverRest(int uiPort) {
        this.base = "http://" + StandaloneCluster.LOCALHOST + ":" + uiPort + "/api/v1/applications";
    }

    /** One task attempt of a stage. */
    record Task(
            long taskId,
            int index,
            int attempt,
            String executorId,
            String status,
            boolean speculative,
            long launchMillis) {}

    /** A stage attempt with its task counts; submitted and completed in epoch milliseconds (0: not yet). */
    record Stage(
            int stageId,
            int attemptId,
            String status,
            int numTasks,
            int numActiveTasks,
            int numCompleteTasks,
            long shuffleWriteBytes,
            String name,
            long submitted,
            long completed) {}

    private Optional<JsonNode> get(String path) {
        try {
            HttpResponse<String> r = http.send(
                    HttpRequest.newBuilder(URI.create(base + path))
                            .timeout(Duration.ofSeconds(5))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? Optional.of(json.readTree(r.body())) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    /** The application's id once the driver's UI answers. */
    Optional<String> appId() {
        if (appId == null) {
            get("").filter(a -> a.size() > 0)
                    .ifPresent(a -> appId = a.get(0).path("id").asText());
        }
        return Optional.ofNullable(appId);
    }

    /** Every stage attempt so far (status ACTIVE, COMPLETE, PENDING, FAILED, SKIPPED). */
    List<Stage> stages() {
        List<Stage> out = new ArrayList<>();
        appId().flatMap(id -> get("/" + id + "/stages"))
                .ifPresent(a -> a.forEach(s -> out.add(new Stage(
                        s.path("stageId").asInt(),
                        s.path("attemptId").asInt(),
                        s.path("status").asText(),
                        s.path("numTasks").asInt(),
                        s.path("numActiveTasks").asInt(),
                        s.path("numCompleteTasks").asInt(),
                        s.path("shuffleWriteBytes").asLong(),
                        s.path("name").asText(),
                        millis(s.path("submissionTime")),
                        millis(s.path("completionTime"))))));
        return out;
    }

    List<Task> tasks(Stage s) {
        List<Task> out = new ArrayList<>();
        appId().flatMap(id -> get("/" + id + "/stages/" + s.stageId() + "/" + s.attemptId() + "/taskList?length=1000"))
                .ifPresent(a -> a.forEach(t -> out.add(new Task(
                        t.path("taskId").asLong(),
                        t.path("index").asInt(),
                        t.path("attempt").asInt(),
                        t.path("executorId").asText(),
                        t.path("status").asText(),
                        t.path("speculative").asBoolean(),
                        millis(t.path("launchTime"))))));
        return out;
    }

    /** A time as the REST API writes it (2026-12-01T13:04:14.123GMT), in epoch milliseconds; 0 when absent. */
    static long millis(JsonNode t) {
        return t.isMissingNode() || t.isNull()
                ? 0
                : java.time.OffsetDateTime.parse(t.asText().replace("GMT", "Z"))
                        .toInstant()
                        .toEpochMilli();
    }
}

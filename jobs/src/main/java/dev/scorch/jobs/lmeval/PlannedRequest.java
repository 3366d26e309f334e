package dev.scorch.jobs.lmeval;

import dev.scorch.jobs.lmeval.task.LmRequest;
import java.util.ArrayList;
import java.util.List;

/** One request with its token sequences (one, or a rolling request's windows) and, after the jobs, its response. */
final class PlannedRequest {
    final LmRequest request;
    final List<LmTokens.Scored> sequences = new ArrayList<>();
    int[] prompt; // generate_until
    int maxGenToks;
    List<String> until;
    double temperature;
    double ll;
    boolean greedy = true;
    String text;

    PlannedRequest(LmRequest request) {
        this.request = request;
    }
}

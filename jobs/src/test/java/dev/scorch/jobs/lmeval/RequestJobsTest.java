package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** Where the score job is told a task's shared prefix ends. */
class RequestJobsTest {
    // Two documents after one 6-token few-shot prompt (1..6), each context ending before its last token.
    static final int[][] FIRST_TWO = {{1, 2, 3, 4, 5, 6, 10, 11}, {1, 2, 3, 4, 5, 6, 20}};

    @Test
    void theSharedPrefixIsWhatTheFirstTwoDocumentsShareWhenItIsHalfTheContext() {
        // a third document: prompt, own tokens 30 31, then the choice; context end 8 (the token before the choice)
        int[] third = {1, 2, 3, 4, 5, 6, 30, 31, 40};
        assertEquals(6, RequestJobs.sharedPrefix(third, 8, FIRST_TWO));
        // the first document's own request shares no more than the first two documents do
        assertEquals(6, RequestJobs.sharedPrefix(new int[] {1, 2, 3, 4, 5, 6, 10, 11, 12}, 8, FIRST_TWO));
        // a context whose own part is longer than what it shares is scored whole
        int[] longOwn = {1, 2, 3, 4, 5, 6, 30, 31, 32, 33, 34, 35, 36, 40};
        assertEquals(0, RequestJobs.sharedPrefix(longOwn, 13, FIRST_TWO));
        // a context that diverges early (a random sampler's examples) shares only what it has in common
        assertEquals(0, RequestJobs.sharedPrefix(new int[] {1, 2, 9, 9, 9, 40}, 5, FIRST_TWO));
        // a context that is all prefix has nothing of its own to extend: none
        assertEquals(0, RequestJobs.sharedPrefix(new int[] {1, 2, 3, 4, 5, 6, 40}, 6, FIRST_TWO));
        // a task with fewer than two documents, or a request with no context
        assertEquals(0, RequestJobs.sharedPrefix(third, 8, null));
        assertEquals(0, RequestJobs.sharedPrefix(new int[] {1, 40}, 0, FIRST_TWO));
    }
}

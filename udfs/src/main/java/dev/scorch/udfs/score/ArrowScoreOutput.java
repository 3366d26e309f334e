package dev.scorch.udfs.score;

import dev.scorch.engine.scoring.BatchScores;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;

/**
 * Builds one window's output rows as Arrow vectors (off-heap, from the task's bounded allocator), straight
 * from the engine's float arrays: no per-token boxing. Spark reads them through ArrowColumnVector.
 */
final class ArrowScoreOutput implements AutoCloseable {
    private final VectorSchemaRoot root;
    private final byte[] model;
    private final FieldVector id;
    private final IntVector numTokens;
    private final ListVector tokenIds;
    private final ListVector tokenLogprobs;
    private final Float8Vector sum;
    private final Float8Vector mean;
    private final Float8Vector perplexity;
    private final ListVector topLogprobs; // null without --top-k
    private final ListVector logits; // null with --logits none
    private final VarCharVector error;
    private final VarCharVector modelCol;
    private final VarCharVector sourceRow;

    ArrowScoreOutput(StructType schema, BufferAllocator allocator, String modelLabel) {
        root = VectorSchemaRoot.create(ArrowUtils.toArrowSchema(schema, "UTC", true, false), allocator);
        model = modelLabel.getBytes(StandardCharsets.UTF_8);
        id = root.getVector(ScoreSchema.ID);
        numTokens = (IntVector) root.getVector("num_tokens");
        tokenIds = (ListVector) root.getVector("token_ids");
        tokenLogprobs = (ListVector) root.getVector("token_logprobs");
        sum = (Float8Vector) root.getVector("sum_logprob");
        mean = (Float8Vector) root.getVector("mean_logprob");
        perplexity = (Float8Vector) root.getVector("perplexity");
        topLogprobs = (ListVector) root.getVector("top_logprobs");
        logits = (ListVector) root.getVector("logits");
        error = (VarCharVector) root.getVector("error");
        modelCol = (VarCharVector) root.getVector("model");
        sourceRow = (VarCharVector) root.getVector(ScoreSchema.SOURCE_ROW);
    }

    /** Starts a new window (the previous window's rows must have been copied out). */
    void reset() {
        root.allocateNew();
    }

    /** Row i: the id copied from the input's id vector at row j, then the scores of sequence seq of scores. */
    void scored(int i, FieldVector inputId, int j, int[] tokens, BatchScores scores, int seq) {
        id.copyFromSafe(j, i, inputId);
        int n = tokens.length;
        numTokens.setSafe(i, n);
        // Per-token columns: one block copy each into the list's data buffer, then the validity bits.
        IntVector ids = (IntVector) tokenIds.getDataVector();
        int off = tokenIds.startNewValue(i);
        ensureCapacity(ids, off + n);
        Platform.copyMemory(
                tokens, Platform.INT_ARRAY_OFFSET, null, ids.getDataBuffer().memoryAddress() + 4L * off, 4L * n);
        for (int k = 0; k < n; k++) {
            ids.setIndexDefined(off + k);
        }
        tokenIds.endValue(i, n);
        Float4Vector lps = (Float4Vector) tokenLogprobs.getDataVector();
        off = tokenLogprobs.startNewValue(i);
        ensureCapacity(lps, off + n);
        float[] lp = scores.tokenLogprobs();
        int t0 = scores.tokenStart(seq);
        Platform.copyMemory(
                lp,
                Platform.FLOAT_ARRAY_OFFSET + 4L * t0,
                null,
                lps.getDataBuffer().memoryAddress() + 4L * off,
                4L * n);
        for (int k = 0; k < n; k++) {
            if (Float.isNaN(lp[t0 + k])) {
                lps.setNull(off + k); // not scored: the first token, or a prompt token
            } else {
                lps.setIndexDefined(off + k);
            }
        }
        tokenLogprobs.endValue(i, n);
        sum.setSafe(i, scores.sumLogprob(seq));
        if (scores.numScored(seq) == 0) {
            mean.setNull(i);
            perplexity.setNull(i);
        } else {
            mean.setSafe(i, scores.meanLogprob(seq));
            perplexity.setSafe(i, scores.perplexity(seq));
        }
        if (topLogprobs != null) {
            writeTop(i, scores, seq, n);
        }
        if (logits != null) {
            writeLogits(i, scores, seq);
        }
        error.setNull(i);
        modelCol.setSafe(i, model);
    }

    private static void ensureCapacity(org.apache.arrow.vector.BaseFixedWidthVector v, int size) {
        while (v.getValueCapacity() < size) {
            v.reAlloc();
        }
    }

    private void writeTop(int i, BatchScores scores, int seq, int n) {
        ListVector perPos = (ListVector) topLogprobs.getDataVector();
        StructVector entry = (StructVector) perPos.getDataVector();
        IntVector entryId = (IntVector) entry.getChild("token_id");
        Float4Vector entryLp = (Float4Vector) entry.getChild("logprob");
        int k = scores.topK(seq);
        int posOff = topLogprobs.startNewValue(i);
        for (int p = 0; p < n; p++) {
            if (k == 0 || !scores.isScored(seq, p)) {
                perPos.setNull(posOff + p);
                continue;
            }
            int src = scores.topOffset(seq, p);
            int eOff = perPos.startNewValue(posOff + p);
            for (int j = 0; j < k; j++) {
                entry.setIndexDefined(eOff + j);
                entryId.setSafe(eOff + j, scores.topIds()[src + j]);
                entryLp.setSafe(eOff + j, scores.topLogprobs()[src + j]);
            }
            perPos.endValue(posOff + p, k);
        }
        topLogprobs.endValue(i, n);
    }

    private void writeLogits(int i, BatchScores scores, int seq) {
        ListVector perRow = (ListVector) logits.getDataVector();
        Float4Vector values = (Float4Vector) perRow.getDataVector();
        int rows = scores.logitsRows(seq);
        int vocab = scores.vocab();
        int rOff = logits.startNewValue(i);
        for (int r = 0; r < rows; r++) {
            int src = scores.logitsOffset(seq, r);
            int vOff = perRow.startNewValue(rOff + r);
            for (int v = 0; v < vocab; v++) {
                values.setSafe(vOff + v, scores.logits()[src + v]);
            }
            perRow.endValue(rOff + r, vocab);
        }
        logits.endValue(i, rows);
    }

    /** Row i's source_row: the input's locator at row j. */
    void source(int i, VarCharVector inputSource, int j) {
        sourceRow.copyFromSafe(j, i, inputSource);
    }

    /** Row i: the id and an error; every score column null. */
    void failed(int i, FieldVector inputId, int j, String message) {
        id.copyFromSafe(j, i, inputId);
        numTokens.setNull(i);
        tokenIds.setNull(i);
        tokenLogprobs.setNull(i);
        sum.setNull(i);
        mean.setNull(i);
        perplexity.setNull(i);
        if (topLogprobs != null) {
            topLogprobs.setNull(i);
        }
        if (logits != null) {
            logits.setNull(i);
        }
        error.setSafe(i, message.getBytes(StandardCharsets.UTF_8));
        modelCol.setSafe(i, model);
    }

    /** The window's n rows as a Spark columnar batch over these vectors. */
    ColumnarBatch finish(int n) {
        root.setRowCount(n);
        ColumnVector[] cols = new ColumnVector[root.getFieldVectors().size()];
        for (int c = 0; c < cols.length; c++) {
            cols[c] = new ArrowColumnVector(root.getFieldVectors().get(c));
        }
        return new ColumnarBatch(cols, n);
    }

    /**
     * The window's rows for Spark. The per-token columns (token_ids, token_logprobs) are copied out of the Arrow
     * data buffers in one block each into Spark's UnsafeArrayData, which Spark's projection then copies in one
     * block too; other columns are read through the columnar batch. Each row is valid until the next reset.
     */
    Iterator<InternalRow> rows(ColumnarBatch batch, StructType schema) {
        int n = batch.numRows();
        int cols = schema.size();
        int tokenIdsCol = schema.fieldIndex("token_ids");
        int logprobsCol = schema.fieldIndex("token_logprobs");
        DataType[] types = new DataType[cols];
        for (int c = 0; c < cols; c++) {
            types[c] = schema.fields()[c].dataType();
        }
        return new Iterator<>() {
            private int i;

            @Override
            public boolean hasNext() {
                return i < n;
            }

            @Override
            public InternalRow next() {
                InternalRow view = batch.getRow(i);
                Object[] values = new Object[cols];
                for (int c = 0; c < cols; c++) {
                    if (view.isNullAt(c)) {
                        continue;
                    }
                    if (c == tokenIdsCol) {
                        values[c] = ints(tokenIds, i);
                    } else if (c == logprobsCol) {
                        values[c] = floats(tokenLogprobs, i);
                    } else {
                        values[c] = view.get(c, types[c]);
                    }
                }
                i++;
                return new GenericInternalRow(values);
            }
        };
    }

    private static UnsafeArrayData ints(ListVector list, int i) {
        int start = list.getElementStartIndex(i);
        int len = list.getElementEndIndex(i) - start;
        int[] a = new int[len];
        long addr = ((IntVector) list.getDataVector()).getDataBuffer().memoryAddress() + 4L * start;
        Platform.copyMemory(null, addr, a, Platform.INT_ARRAY_OFFSET, 4L * len);
        return UnsafeArrayData.fromPrimitiveArray(a);
    }

    private static UnsafeArrayData floats(ListVector list, int i) {
        int start = list.getElementStartIndex(i);
        int len = list.getElementEndIndex(i) - start;
        Float4Vector data = (Float4Vector) list.getDataVector();
        float[] a = new float[len];
        Platform.copyMemory(
                null, data.getDataBuffer().memoryAddress() + 4L * start, a, Platform.FLOAT_ARRAY_OFFSET, 4L * len);
        UnsafeArrayData u = UnsafeArrayData.fromPrimitiveArray(a);
        for (int k = 0; k < len; k++) {
            if (data.isNull(start + k)) {
                u.setNullAt(k);
            }
        }
        return u;
    }

    @Override
    public void close() {
        root.close();
    }
}

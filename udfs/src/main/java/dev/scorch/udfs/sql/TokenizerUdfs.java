package dev.scorch.udfs.sql;

import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.StructType;

/**
 * The Java UDFs behind {@link ScorchFunctions}. Each carries the {@link TokenizerShipment} (not the
 * tokenizer) into the task and looks the tokenizer up in {@link ExecutorTokenizerCache}. A null argument gives
 * null; anything else that cannot be done throws a {@link ScorchFunctionException} whose message starts with
 * the SQL function's name.
 */
final class TokenizerUdfs {
    private TokenizerUdfs() {}

    /** A row a SQL function cannot compute; the message starts with the function's name. */
    static final class ScorchFunctionException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ScorchFunctionException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private abstract static class Base implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String name;
        final TokenizerShipment shipment;

        Base(String name, TokenizerShipment shipment) {
            this.name = name;
            this.shipment = shipment;
        }

        Tokenizer tokenizer() {
            try {
                return ExecutorTokenizerCache.tokenizer(shipment);
            } catch (RuntimeException e) {
                throw fail("cannot load the " + shipment + ": " + e.getMessage(), e);
            }
        }

        ScorchFunctionException fail(String what, Throwable cause) {
            return new ScorchFunctionException(name + ": " + what, cause);
        }

        String text(Object v) {
            if (v instanceof String s) {
                return s;
            }
            throw fail("expects a STRING argument, got " + v.getClass().getName() + " (use CAST(... AS STRING))", null);
        }

        String detail(RuntimeException e) {
            return e.getMessage() != null ? e.getMessage() : e.toString();
        }

        /** The ids of a STRING argument; a failure names the function. */
        int[] encode(Object v, boolean addSpecialTokens) {
            String t = text(v);
            try {
                return tokenizer().encode(t, addSpecialTokens);
            } catch (ScorchFunctionException e) {
                throw e;
            } catch (RuntimeException e) {
                throw fail("cannot tokenize a text of " + t.length() + " characters: " + detail(e), e);
            }
        }
    }

    /** scorch_tokenize / scorch_tokenize_raw: STRING -> ARRAY&lt;INT&gt;. */
    static final class Tokenize extends Base implements UDF1<Object, int[]> {
        private static final long serialVersionUID = 1L;
        private final boolean addSpecialTokens;

        Tokenize(String name, TokenizerShipment shipment, boolean addSpecialTokens) {
            super(name, shipment);
            this.addSpecialTokens = addSpecialTokens;
        }

        @Override
        public int[] call(Object v) {
            if (v == null) {
                return null;
            }
            return encode(v, addSpecialTokens);
        }
    }

    /** scorch_num_tokens: STRING -> INT, the length of scorch_tokenize (special tokens included). */
    static final class NumTokens extends Base implements UDF1<Object, Integer> {
        private static final long serialVersionUID = 1L;

        NumTokens(String name, TokenizerShipment shipment) {
            super(name, shipment);
        }

        @Override
        public Integer call(Object v) {
            if (v == null) {
                return null;
            }
            return encode(v, true).length;
        }
    }

    /** scorch_detokenize: ARRAY&lt;INT or BIGINT&gt; -> STRING, special tokens skipped. */
    static final class Detokenize extends Base implements UDF1<Object, String> {
        private static final long serialVersionUID = 1L;

        Detokenize(String name, TokenizerShipment shipment) {
            super(name, shipment);
        }

        @Override
        public String call(Object v) {
            if (v == null) {
                return null;
            }
            if (!(v instanceof scala.collection.Seq<?> seq)) {
                throw fail("expects an ARRAY<INT> argument, got " + v.getClass().getName(), null);
            }
            int[] ids = new int[seq.size()];
            int i = 0;
            for (scala.collection.Iterator<?> it = seq.iterator(); it.hasNext(); i++) {
                Object o = it.next();
                if (!(o instanceof Number n)) {
                    throw fail(
                            o == null
                                    ? "null token id at position " + i
                                    : "expects an ARRAY<INT> argument, got an element of "
                                            + o.getClass().getName(),
                            null);
                }
                long id = n.longValue();
                if (id < 0 || id > Integer.MAX_VALUE || (o instanceof Double || o instanceof Float)) {
                    throw fail("token id " + o + " at position " + i + " is not a token id", null);
                }
                ids[i] = (int) id;
            }
            Tokenizer tok = tokenizer();
            for (int j = 0; j < ids.length; j++) {
                if (ids[j] >= tok.vocabSize()) {
                    throw fail(
                            "token id " + ids[j] + " at position " + j + " is outside the vocabulary (size "
                                    + tok.vocabSize() + ")",
                            null);
                }
            }
            try {
                return tok.decode(ids, true);
            } catch (RuntimeException e) {
                throw fail("cannot decode " + ids.length + " ids: " + detail(e), e);
            }
        }
    }

    /**
     * scorch_chat: ARRAY&lt;STRUCT&lt;role STRING, content STRING, ...&gt;&gt; (or ARRAY&lt;MAP&lt;STRING, ...&gt;&gt;) -> STRING,
     * the chat template rendered with add_generation_prompt true. Struct fields besides role and content are
     * passed to the template too (nested structs as maps, arrays as lists).
     */
    static final class Chat extends Base implements UDF1<Object, String> {
        private static final long serialVersionUID = 1L;

        Chat(String name, TokenizerShipment shipment) {
            super(name, shipment);
        }

        @Override
        public String call(Object v) {
            if (v == null) {
                return null;
            }
            if (!(v instanceof scala.collection.Seq<?> seq)) {
                throw fail(
                        "expects an ARRAY<STRUCT<role STRING, content STRING>> argument, got "
                                + v.getClass().getName(),
                        null);
            }
            List<Map<String, Object>> messages = new ArrayList<>(seq.size());
            int i = 0;
            for (scala.collection.Iterator<?> it = seq.iterator(); it.hasNext(); i++) {
                Object m = it.next();
                Map<String, Object> map = message(m, i);
                if (!(map.get("role") instanceof String)) {
                    throw fail("message " + i + " has no role (expects STRUCT<role STRING, content STRING>)", null);
                }
                messages.add(map);
            }
            Tokenizer tok = tokenizer();
            ChatTemplate template = tok.chatTemplate()
                    .orElseThrow(() -> fail(
                            "the " + shipment
                                    + " has no chat template (tokenizer_config.json chat_template or chat_template.jinja)",
                            null));
            try {
                return template.renderMaps(messages, true, Map.of());
            } catch (RuntimeException e) {
                throw fail(detail(e), e);
            }
        }

        private Map<String, Object> message(Object m, int i) {
            if (m == null) {
                throw fail("message " + i + " is null", null);
            }
            if (m instanceof Row r) {
                StructType schema = r.schema();
                Map<String, Object> out = new LinkedHashMap<>();
                if (schema == null) {
                    // No field names: take (role, content) by position.
                    out.put("role", r.size() > 0 ? value(r.get(0)) : null);
                    out.put("content", r.size() > 1 ? value(r.get(1)) : null);
                } else {
                    String[] names = schema.fieldNames();
                    for (int f = 0; f < names.length; f++) {
                        out.put(names[f], value(r.get(f)));
                    }
                }
                return out;
            }
            if (m instanceof scala.collection.Map<?, ?>) {
                @SuppressWarnings("unchecked")
                Map<String, Object> out = (Map<String, Object>) value(m);
                return out;
            }
            throw fail(
                    "message " + i + " is a " + m.getClass().getName()
                            + ", expects STRUCT<role STRING, content STRING>",
                    null);
        }

        /** A Spark external value as the template sees it: structs and maps as maps, arrays as lists. */
        private static Object value(Object v) {
            if (v instanceof Row r) {
                Map<String, Object> out = new LinkedHashMap<>();
                String[] names = r.schema() == null ? null : r.schema().fieldNames();
                for (int f = 0; f < r.size(); f++) {
                    out.put(names == null ? "_" + (f + 1) : names[f], value(r.get(f)));
                }
                return out;
            }
            if (v instanceof scala.collection.Map<?, ?> sm) {
                Map<String, Object> out = new LinkedHashMap<>();
                for (scala.collection.Iterator<? extends scala.Tuple2<?, ?>> it = sm.iterator(); it.hasNext(); ) {
                    scala.Tuple2<?, ?> e = it.next();
                    out.put(String.valueOf(e._1()), value(e._2()));
                }
                return out;
            }
            if (v instanceof scala.collection.Seq<?> s) {
                List<Object> out = new ArrayList<>(s.size());
                for (scala.collection.Iterator<?> it = s.iterator(); it.hasNext(); ) {
                    out.add(value(it.next()));
                }
                return out;
            }
            return v;
        }
    }
}

/*
 * What the JNI wrappers of scorch_cpu.c, scorch_attention.c and scorch_vecmath.c do when the JVM gives them no address
 * (a buffer that is not direct, an array it cannot pin): throw, so a call never returns having done nothing.
 */
#ifndef SCORCH_JNI_H
#define SCORCH_JNI_H
#include <jni.h>

/* Throws a new cls(message) unless an exception is already pending (the JVM's own, which says more). */
static inline void scorch_throw(JNIEnv* env, const char* cls, const char* message) {
  if ((*env)->ExceptionCheck(env)) {
    return;
  }
  jclass c = (*env)->FindClass(env, cls);
  if (c) {
    (*env)->ThrowNew(env, c, message);
  }
}

/* The address of direct buffer buf; NULL, with IllegalArgumentException(message) pending, where it has none. */
static inline void* scorch_address(JNIEnv* env, jobject buf, const char* message) {
  void* p = (*env)->GetDirectBufferAddress(env, buf);
  if (!p) {
    scorch_throw(env, "java/lang/IllegalArgumentException", message);
  }
  return p;
}

/*
 * After GetPrimitiveArrayCritical returned NULL for the array named, and every array pinned has been released (no JNI
 * call is allowed inside a critical region): the JVM's pending error, else IllegalStateException.
 */
static inline void scorch_unpinned(JNIEnv* env, const char* message) {
  scorch_throw(env, "java/lang/IllegalStateException", message);
}
#endif
